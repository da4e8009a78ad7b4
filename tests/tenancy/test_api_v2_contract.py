"""Comfy API v2 routes read at the HTTP level (aiohttp's client): the contract's error envelope and
codes, idempotency keys, pagination, labels, range requests, asset dedup, and the v1 limits and
keys applied to v2."""

from __future__ import annotations

import asyncio
import io
import json

import blake3
import tenant_nodes
from aiohttp import FormData
from PIL import Image


def png(color=(9, 8, 7)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (5, 5), color).save(buf, format="PNG")
    return buf.getvalue()


def form(data: bytes, file_path: str = "in.png", **fields) -> FormData:
    f = FormData()
    f.add_field("content_type", "image/png")
    f.add_field("file_path", file_path)
    for name, value in fields.items():
        f.add_field(name, str(value))
    f.add_field("file", data, filename=file_path, content_type="image/png")
    return f


async def error_of(resp) -> tuple[int, str]:
    body = await resp.json()
    assert set(body) == {"error"} and {"code", "message"} <= set(body["error"]), body
    return resp.status, body["error"]["code"]


async def wait_job(client, headers, job_id: str, timeout: float = 20.0) -> dict:
    for _ in range(int(timeout / 0.05)):
        job = await (await client.get(f"/api/v2/jobs/{job_id}", headers=headers)).json()
        if job["status"] in ("succeeded", "failed", "canceled"):
            return job
        await asyncio.sleep(0.05)
    raise TimeoutError(job_id)


async def test_keys_and_error_envelope(hosted):
    auth = hosted.add("alice")
    c = hosted.client
    assert await error_of(await c.get("/api/v2/jobs")) == (401, "unauthorized")
    assert await error_of(await c.get("/api/v2/jobs", headers={"X-API-Key": "nope"})) == (401, "unauthorized")
    assert (await c.get("/api/v2/health")).status == 200  # a load balancer's probe needs no key
    x_api_key = {"X-API-Key": hosted.keys["alice"]}
    assert (await c.get("/api/v2/jobs", headers=x_api_key)).status == 200
    assert await error_of(await c.get("/api/v2/jobs/nope", headers=auth)) == (404, "not_found")
    post = lambda body, **h: c.post("/api/v2/jobs", json=body, headers={**auth, **h})  # noqa: E731
    assert await error_of(await post({"workflow": {"nodes": [], "links": []}})) == (422, "workflow_format_ui")
    resp = await post({"workflow": {"1": {"class_type": "NoSuchNode", "inputs": {}}}})
    assert await error_of(resp) == (422, "invalid_workflow")
    assert await error_of(await post({"workflow": tenant_nodes.prompt(1), "extra_data": {"x": "y"}})) == (
        422,
        "invalid_request",
    )
    assert await error_of(await post({"workflow": tenant_nodes.prompt(1), "metadata": {"bad key!": "v"}})) == (
        422,
        "metadata_invalid",
    )
    ref = {"1": {"class_type": "TCopyInput", "inputs": {"image": {"__type": "core/ASSET", "info": {"id": "x"}}}}}
    resp = await post({"workflow": ref})
    assert await error_of(resp) == (422, "missing_asset")


async def test_idempotency_key_is_single_use_and_released_on_rejection(hosted):
    auth = hosted.add("alice")
    bob = hosted.add("bob")
    c = hosted.client
    bad = {"workflow": {"1": {"class_type": "NoSuchNode", "inputs": {}}}}
    assert (await c.post("/api/v2/jobs", json=bad, headers={**auth, "Idempotency-Key": "k"})).status == 422
    first = await c.post(
        "/api/v2/jobs", json={"workflow": tenant_nodes.prompt(1)}, headers={**auth, "Idempotency-Key": "k"}
    )  # the rejected request gave the key back
    assert first.status == 201
    again = await c.post(
        "/api/v2/jobs", json={"workflow": tenant_nodes.prompt(2)}, headers={**auth, "Idempotency-Key": "k"}
    )
    assert await error_of(again) == (422, "idempotency_key_reuse")
    other = await c.post(
        "/api/v2/jobs", json={"workflow": tenant_nodes.prompt(3)}, headers={**bob, "Idempotency-Key": "k"}
    )  # keys are per tenant
    assert other.status == 201
    jobs = (await (await c.get("/api/v2/jobs", headers=auth)).json())["jobs"]
    assert [j["id"] for j in jobs] == [(await first.json())["id"]]


async def test_list_pages_newest_first_with_labels(hosted):
    auth = hosted.add("alice")
    c = hosted.client
    ids = []
    for i in range(5):
        resp = await c.post(
            "/api/v2/jobs",
            json={"workflow": tenant_nodes.prompt(i), "metadata": {"batch": "odd" if i % 2 else "even"}},
            headers=auth,
        )
        ids.append((await resp.json())["id"])
    seen, cursor = [], None
    while True:
        resp = await c.get("/api/v2/jobs", params={"limit": 2, **({"cursor": cursor} if cursor else {})}, headers=auth)
        page = await resp.json()
        assert len(page["jobs"]) <= 2
        seen += [j["id"] for j in page["jobs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ids[::-1]
    odd = await (await c.get("/api/v2/jobs", params={"metadata[batch]": "odd"}, headers=auth)).json()
    assert [j["id"] for j in odd["jobs"]] == [ids[3], ids[1]]
    assert all(j["metadata"] == {"batch": "odd"} for j in odd["jobs"])
    assert await error_of(await c.get("/api/v2/jobs", params={"limit": 101}, headers=auth)) == (400, "invalid_request")
    assert await error_of(await c.get("/api/v2/jobs", params={"cursor": "garbage"}, headers=auth)) == (
        400,
        "invalid_cursor",
    )
    done = await wait_job(c, auth, ids[0])
    assert done["status"] == "succeeded"
    workflow = await (await c.get(f"/api/v2/jobs/{ids[0]}/workflow", headers=auth)).json()
    assert workflow == {"workflow": tenant_nodes.prompt(0), "format": "api"}


async def test_asset_upload_dedup_hash_and_ranges(hosted):
    auth = hosted.add("alice")
    c = hosted.client
    data = png()
    digest = "blake3:" + blake3.blake3(data).hexdigest()
    resp = await c.post("/api/v2/assets", data=form(data, expected_hash="blake3:" + "0" * 64), headers=auth)
    assert await error_of(resp) == (409, "hash_mismatch")
    assert (await c.head(f"/api/v2/assets/by-hash/{digest}", headers=auth)).status == 404
    assert await error_of(await c.post("/api/v2/assets/from-hash", json={"hash": digest}, headers=auth)) == (
        404,
        "blob_not_found",
    )
    resp = await c.post("/api/v2/assets", data=form(data, expected_hash=digest), headers=auth)
    assert resp.status == 201
    first = await resp.json()
    assert first["hash"] == digest and first["size_bytes"] == len(data) and first["created_new"] is True
    assert first["job_id"] is None and first["expires_at"] is None
    resp = await c.post("/api/v2/assets", data=form(data, file_path="other.png"), headers=auth)
    assert resp.status == 200
    dup = await resp.json()
    assert dup["created_new"] is False and dup["id"] != first["id"] and dup["file_path"] == "other.png"
    assert (await c.head(f"/api/v2/assets/by-hash/{digest}", headers=auth)).status == 200
    minted = await c.post("/api/v2/assets/from-hash", json={"hash": digest, "file_path": "third.png"}, headers=auth)
    assert minted.status == 201
    # one file for three records: the input folder holds it once
    inputs = [
        p.name
        for p in (hosted.server.workspace.root / "input" / "tenants" / "alice").iterdir()
        if not p.name.startswith(".")
    ]
    assert inputs == ["in.png"]
    url = f"/api/v2/assets/{first['id']}/content"
    whole = await c.get(url, headers=auth)
    assert whole.status == 200 and await whole.read() == data
    part = await c.get(url, headers={**auth, "Range": "bytes=4-9"})
    assert part.status == 206 and await part.read() == data[4:10]
    assert part.headers["Content-Range"] == f"bytes 4-9/{len(data)}"
    assert (await c.get(url, headers={**auth, "Range": f"bytes={len(data) + 5}-"})).status == 416
    # deleting one record keeps the bytes the others stand on; the last one takes them
    assert (await c.delete(f"/api/v2/assets/{first['id']}", headers=auth)).status == 204
    assert await error_of(await c.delete(f"/api/v2/assets/{first['id']}", headers=auth)) == (404, "not_found")
    assert await (await c.get(f"/api/v2/assets/{dup['id']}/content", headers=auth)).read() == data
    for asset_id in (dup["id"], (await minted.json())["id"]):
        assert (await c.delete(f"/api/v2/assets/{asset_id}", headers=auth)).status == 204
    assert not (hosted.server.workspace.root / "input" / "tenants" / "alice" / "in.png").exists()


async def test_upload_refuses_unsafe_paths_and_oversize(hosted):
    auth = hosted.add("alice", max_upload_bytes=1000)
    c = hosted.client
    for bad in ("../escape.png", "/abs.png", "a\\b.png", ".hidden"):
        assert await error_of(await c.post("/api/v2/assets", data=form(png(), file_path=bad), headers=auth)) == (
            422,
            "invalid_request",
        ), bad
    big = b"x" * 2000
    assert await error_of(await c.post("/api/v2/assets", data=form(big), headers=auth)) == (413, "payload_too_large")
    root = hosted.server.workspace.root
    folder = root / "input" / "tenants" / "alice"
    assert not folder.exists() or not list(folder.iterdir())
    assert not list((root / ".v2-uploads").iterdir())  # nothing half-received left behind


async def test_tenant_limits_apply_to_v2_jobs(hosted):
    auth = hosted.add("alice", max_queued=1, max_nodes=2)
    c = hosted.client
    three = {**tenant_nodes.prompt(1), "3": {"class_type": "TNumber", "inputs": {"value": 2}}}
    assert await error_of(await c.post("/api/v2/jobs", json={"workflow": three}, headers=auth)) == (
        413,
        "payload_too_large",
    )
    slow = tenant_nodes.prompt(1, slow=5.0)
    assert (await c.post("/api/v2/jobs", json={"workflow": slow}, headers=auth)).status == 201
    resp = await c.post("/api/v2/jobs", json={"workflow": tenant_nodes.prompt(2)}, headers=auth)
    assert await error_of(resp) == (429, "queue_full")
    assert int(resp.headers["Retry-After"]) > 0


async def test_jobs_expire_at_their_deadline(hosted):
    auth = hosted.add("alice")
    c = hosted.client
    service = hosted.server.v2
    service.job_retention_s = 2.0
    job = await (
        await c.post("/api/v2/jobs", json={"workflow": tenant_nodes.prompt(8, prefix="brief")}, headers=auth)
    ).json()
    done = await wait_job(c, auth, job["id"])
    assert done["status"] == "succeeded" and done["expires_at"] == job["expires_at"]
    output_id = done["outputs"][0]["id"]
    while (await c.get(f"/api/v2/jobs/{job['id']}", headers=auth)).status == 200:
        await asyncio.sleep(0.1)
    for path in (f"/api/v2/jobs/{job['id']}", f"/api/v2/jobs/{job['id']}/workflow", f"/api/v2/assets/{output_id}"):
        assert await error_of(await c.get(path, headers=auth)) == (404, "not_found"), path
    assert (await (await c.get("/api/v2/jobs", headers=auth)).json())["jobs"] == []
    assert await asyncio.to_thread(service.purge) == 1  # the sweep forgets the job and its output records
    assert service.store.job_by_id(job["id"]) is None and service.store.job_assets(job["id"]) == []
    assert (hosted.server.workspace.root / "output" / "tenants" / "alice" / "brief_8.png").is_file()  # v1's file


async def test_an_interrupt_that_is_no_cancel_fails_the_job(hosted):
    """Interrupted by /interrupt (or a server stopping), not by its cancel route: `failed`, code
    `interrupted`; the cancel route's interrupt is `canceled`."""
    auth = hosted.add("alice")
    c = hosted.client
    ids = []
    for _ in range(2):
        job = await (
            await c.post("/api/v2/jobs", json={"workflow": tenant_nodes.prompt(1, slow=30.0)}, headers=auth)
        ).json()
        ids.append(job["id"])
    for job_id, stop in zip(ids, ("interrupt", "cancel")):
        while (await (await c.get(f"/api/v2/jobs/{job_id}", headers=auth)).json())["status"] != "running":
            await asyncio.sleep(0.05)
        if stop == "interrupt":
            assert (await c.post("/interrupt", json={}, headers=auth)).status == 200
        else:
            assert (await (await c.post(f"/api/v2/jobs/{job_id}/cancel", headers=auth)).json())["status"] == "canceling"
    interrupted, canceled = [await wait_job(c, auth, job_id) for job_id in ids]
    assert interrupted["status"] == "failed" and interrupted["error"]["code"] == "interrupted"
    assert canceled["status"] == "canceled" and canceled["error"] is None


async def test_concurrent_submissions_under_one_key_make_one_job(hosted):
    auth = {**hosted.add("alice"), "Idempotency-Key": "race"}
    c = hosted.client
    answers = await asyncio.gather(
        *(c.post("/api/v2/jobs", json={"workflow": tenant_nodes.prompt(i)}, headers=auth) for i in range(6))
    )
    assert sorted(r.status for r in answers) == [201] + [422] * 5
    jobs = (await (await c.get("/api/v2/jobs", headers=auth)).json())["jobs"]
    assert len(jobs) == 1


async def read_events(resp, until) -> list[tuple[str, dict]]:
    """(event, data) frames of an SSE response up to the first one `until` accepts."""
    got, event = [], None
    async with asyncio.timeout(30):
        async for raw in resp.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                got.append((event, json.loads(line[6:])))
                if until(*got[-1]):
                    return got


async def test_a_queued_jobs_stream_follows_its_position(hosted):
    auth = hosted.add("alice")
    c = hosted.client
    post = lambda wf: c.post("/api/v2/jobs", json={"workflow": wf}, headers=auth)  # noqa: E731
    running = await (await post(tenant_nodes.prompt(1, slow=30.0))).json()
    ahead = await (await post(tenant_nodes.prompt(2))).json()
    mine = await (await post(tenant_nodes.prompt(3, prefix="mine"))).json()
    while (await (await c.get(f"/api/v2/jobs/{running['id']}", headers=auth)).json())["status"] != "running":
        await asyncio.sleep(0.05)
    stream = await c.get(f"/api/v2/jobs/{mine['id']}/events", headers=auth)
    assert stream.headers["Content-Type"] == "text/event-stream"
    first = await read_events(stream, lambda e, d: e == "status")
    assert first[-1][1] == {"status": "queued", "queue_position": 2}
    await c.post(f"/api/v2/jobs/{ahead['id']}/cancel", headers=auth)
    moved = await read_events(stream, lambda e, d: e == "status")
    assert moved[-1][1] == {"status": "queued", "queue_position": 1}
    await c.post(f"/api/v2/jobs/{running['id']}/cancel", headers=auth)
    rest = await read_events(stream, lambda e, d: e == "status" and d["status"] in ("succeeded", "failed"))
    statuses = [d["status"] for e, d in rest if e == "status"]
    assert statuses == ["running", "succeeded"], rest
    assert [o["name"] for o in rest[-1][1]["outputs"]] == ["mine_3.png"]  # the terminal status carries outputs
    assert [o["name"] for e, o in rest if e == "output"] == ["mine_3.png"]


async def test_only_the_jobs_own_prompt_feeds_its_stream(hosted):
    """Engine messages addressed to `v2-<job id>` feed the job's stream only when they come from the job's
    tenant and name the job's prompt: a prompt of another tenant (or another prompt) given that client id
    reaches nothing."""
    from comfy_bridge.tenancy import tenant_context

    alice = hosted.add("alice")
    hosted.add("bob")
    c = hosted.client
    slow = await (
        await c.post("/api/v2/jobs", json={"workflow": tenant_nodes.prompt(1, slow=30.0)}, headers=alice)
    ).json()
    job = await (await c.post("/api/v2/jobs", json={"workflow": tenant_nodes.prompt(2)}, headers=alice)).json()
    while (await (await c.get(f"/api/v2/jobs/{slow['id']}", headers=alice)).json())["status"] != "running":
        await asyncio.sleep(0.05)
    service = hosted.server.v2
    queue = service.hub.subscribe(job["id"])  # the job waits behind the slow one: its stream is quiet
    sid = f"v2-{job['id']}"
    for tenant, prompt_id in (("bob", job["id"]), ("alice", "another-prompt")):
        with tenant_context.scoped(tenant):
            service.observe("executing", {"node": "2", "prompt_id": prompt_id}, sid)
            service.observe("executed", {"node": "2", "prompt_id": prompt_id, "output": {}}, sid)
    await asyncio.sleep(0.2)
    assert queue.empty() and service.hub.progress(job["id"]).current is None
    with tenant_context.scoped("alice"):  # positive control: the job's own prompt is heard
        service.observe("executing", {"node": "2", "prompt_id": job["id"]}, sid)
    event, (_, payload) = await asyncio.wait_for(queue.get(), 5)
    assert event == "progress" and payload["current_node"] == "2"
    service.hub.unsubscribe(job["id"], queue)


async def test_a_stream_does_not_replay_what_its_first_snapshot_holds(hosted, monkeypatch):
    """The engine moves on between a stream's subscription and its first snapshot: the changes the
    snapshot already holds wait in the stream's queue and are not sent again (progress only goes up)."""
    from comfy_bridge.tenancy import tenant_context

    alice = hosted.add("alice")
    c = hosted.client
    job = await (
        await c.post("/api/v2/jobs", json={"workflow": tenant_nodes.prompt(1, slow=30.0)}, headers=alice)
    ).json()
    while (await (await c.get(f"/api/v2/jobs/{job['id']}", headers=alice)).json())["status"] != "running":
        await asyncio.sleep(0.05)
    service, sid = hosted.server.v2, f"v2-{job['id']}"

    def step(value: int) -> None:
        with tenant_context.scoped("alice"):
            service.observe("progress", {"node": "2", "value": value, "max": 9, "prompt_id": job["id"]}, sid)

    job_view = service.job_view

    def moving_view(*args):  # the stream's snapshot is read after the engine reported steps 1 and 2
        step(1)
        step(2)
        return job_view(*args)

    monkeypatch.setattr(service, "job_view", moving_view)
    stream = await c.get(f"/api/v2/jobs/{job['id']}/events", headers=alice)
    monkeypatch.setattr(service, "job_view", job_view)
    first = await read_events(stream, lambda e, d: e == "progress")
    step(3)
    rest = await read_events(stream, lambda e, d: e == "progress")
    assert [d["step"] for e, d in first + rest if e == "progress"] == [2, 3], first + rest
    await c.post(f"/api/v2/jobs/{job['id']}/cancel", headers=alice)


async def test_a_job_deleted_from_the_v1_queue_reads_as_lost(hosted):
    auth = hosted.add("alice")
    c = hosted.client
    slow = await (
        await c.post("/api/v2/jobs", json={"workflow": tenant_nodes.prompt(1, slow=30.0)}, headers=auth)
    ).json()
    job = await (await c.post("/api/v2/jobs", json={"workflow": tenant_nodes.prompt(2)}, headers=auth)).json()
    assert (await c.post("/queue", json={"delete": [job["id"]]}, headers=auth)).status == 200
    lost = await (await c.get(f"/api/v2/jobs/{job['id']}", headers=auth)).json()
    assert lost["status"] == "failed" and lost["error"]["code"] == "job_lost"
    await c.post(f"/api/v2/jobs/{slow['id']}/cancel", headers=auth)
