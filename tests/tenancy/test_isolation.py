"""Two tenants: every route of the face tried by one against the other's prompt ids, files, user
data and settings is denied or answers only the caller's own (empty) data, with no byte of the
other's data in any answer."""
from __future__ import annotations

import asyncio

import aiohttp
import tenant_nodes as tn


async def _running(hosted, name: str, prompt_id: str) -> bool:
    resp = await hosted.client.get("/queue", headers=hosted.auth(name))
    return any(item[1] == prompt_id for item in (await resp.json())["queue_running"])


async def _wait_running(hosted, name, prompt_id, timeout=10.0):
    for _ in range(int(timeout / 0.02)):
        if await _running(hosted, name, prompt_id):
            return
        await asyncio.sleep(0.02)
    raise TimeoutError(prompt_id)


async def test_every_route_denies_the_other_tenants_data(hosted, workspace):
    alice, bob = hosted.add("alice"), hosted.add("bob")
    client = hosted.client
    done = (await hosted.post_prompt("alice", tn.prompt(11, prefix="secretimg")))["prompt_id"]
    await hosted.wait_history("alice", done)
    form = aiohttp.FormData()
    form.add_field("image", b"ALICE-UPLOAD-BYTES", filename="aliceinput.png")
    assert (await client.post("/upload/image", data=form, headers=alice)).status == 200
    assert (await client.post("/userdata/workflows%2Faliceflow.json", data=b'{"ALICE": 1}',
                              headers=alice)).status == 200
    assert (await client.post("/settings", json={"alice.secret": "ALICE-SETTING"}, headers=alice)).status == 200
    running = (await hosted.post_prompt("alice", tn.prompt(12, prefix="secretslow", slow=30)))["prompt_id"]
    pending = (await hosted.post_prompt("alice", tn.prompt(13, prefix="secretpending")))["prompt_id"]
    await _wait_running(hosted, "alice", running)

    # Alice's files are in her folders, not in the shared ones.
    assert (workspace.output_dir / "tenants" / "alice" / "secretimg_11.png").is_file()
    assert not (workspace.output_dir / "secretimg_11.png").exists()
    assert (workspace.input_dir / "tenants" / "alice" / "aliceinput.png").is_file()

    secrets = [done, running, pending, "secretimg", "secretslow", "secretpending", "aliceinput", "ALICE",
               "aliceflow", "tenants/alice"]
    reads = ["/queue", "/history", f"/history/{done}", f"/history/{running}", "/jobs", f"/jobs/{done}",
             f"/jobs/{running}", f"/jobs/{pending}", "/prompt", "/view?filename=secretimg_11.png",
             "/view?filename=secretimg_11.png&subfolder=..%2Falice", "/view?filename=secretimg_11.png&subfolder=../alice",
             "/view?filename=aliceinput.png&type=input", "/view?filename=../alice/aliceinput.png&type=input",
             "/userdata?dir=workflows", "/userdata/workflows%2Faliceflow.json", "/v2/userdata",
             "/v2/userdata?path=workflows", "/settings", "/settings/alice.secret", "/internal/files/input",
             "/internal/files/output", "/internal/logs", "/internal/logs/raw", "/cluster/tenants/alice/usage",
             "/api/history", "/api/queue", "/api/jobs"]
    for path in reads:
        resp = await client.get(path, headers=bob)
        body = await resp.read()
        assert resp.status < 500, path
        for secret in secrets:
            assert secret.encode() not in body, (path, secret, body[:300])
    for path in ("/view?filename=secretimg_11.png", "/view?filename=aliceinput.png&type=input",
                 "/userdata/workflows%2Faliceflow.json"):
        assert (await client.get(path, headers=bob)).status in (400, 403, 404), path

    writes = [("post", "/queue", {"delete": [pending]}), ("post", "/queue", {"clear": True}),
              ("post", "/history", {"delete": [done]}), ("post", "/history", {"clear": True}),
              ("post", f"/jobs/{pending}/cancel", None), ("post", f"/jobs/{running}/cancel", None),
              ("post", "/jobs/cancel", {"job_ids": [pending, running]}), ("post", "/interrupt", {"prompt_id": running}),
              ("post", "/interrupt", {}), ("post", "/free", {"free_memory": True}),
              ("delete", "/userdata/workflows%2Faliceflow.json", None),
              ("post", "/userdata/workflows%2Faliceflow.json/move/workflows%2Fstolen.json", None)]
    for method, path, body in writes:
        resp = await client.request(method, path, json=body, headers=bob)
        assert resp.status < 500, path
        text = await resp.read()
        assert not any(s.encode() in text for s in secrets), path
        cancelled = (await resp.json())["cancelled"] if path.startswith("/jobs") else False
        assert cancelled is False, path

    await asyncio.sleep(0.3)
    assert await _running(hosted, "alice", running), "bob's interrupt reached alice's prompt"
    resp = await client.get("/queue", headers=alice)
    assert [i[1] for i in (await resp.json())["queue_pending"]] == [pending]
    assert done in await (await client.get("/history", headers=alice)).json()
    assert (await client.get("/userdata/workflows%2Faliceflow.json", headers=alice)).status == 200
    assert await (await client.get("/settings/alice.secret", headers=alice)).json() == "ALICE-SETTING"
    assert (await client.get("/view?filename=secretimg_11.png", headers=alice)).status == 200

    # Alice can stop her own prompt with the same calls that did nothing for bob.
    assert (await client.post("/interrupt", json={}, headers=alice)).status == 200
    entry = await hosted.wait_history("alice", running)
    assert entry["status"]["status_str"] == "error"


async def test_requests_without_a_valid_key_are_refused(hosted):
    hosted.add("alice")
    for path in ("/queue", "/history", "/object_info", "/view?filename=x.png", "/settings", "/ws"):
        assert (await hosted.client.get(path)).status == 401, path
        resp = await hosted.client.get(path, headers={"Authorization": "Bearer cc_000000000000_" + "x" * 43})
        assert resp.status == 401, path
    assert (await hosted.client.post("/prompt", json={"prompt": tn.prompt(1)})).status == 401


async def test_client_cannot_charge_another_tenant_or_reuse_its_prompt_id(hosted):
    hosted.add("alice")
    hosted.add("bob")
    out = await hosted.post_prompt("alice", tn.prompt(5), extra_data={"tenant": "bob"})
    entry = await hosted.wait_history("alice", out["prompt_id"])
    assert entry["prompt"][3]["tenant"] == "alice"
    resp = await hosted.client.post("/prompt", json={"prompt": tn.prompt(6), "prompt_id": out["prompt_id"]},
                                    headers=hosted.auth("bob"))
    assert resp.status == 409


async def test_single_user_on_loopback_needs_no_key_and_sees_everything(hosted):
    out = await hosted.post_prompt(None, tn.prompt(21, prefix="solo"))
    entry = await hosted.wait_history(None, out["prompt_id"])
    assert entry["outputs"]["2"]["images"][0]["filename"] == "solo_21.png"
    resp = await hosted.client.get("/view?filename=solo_21.png")
    assert resp.status == 200
    assert (hosted.server.workspace.output_dir / "solo_21.png").is_file()
