"""HTTP probes of Comfy API v2 where behaviour matters (error codes and envelopes, status transitions,
idempotency, dedup, paging limits, range requests), run the same way against the reference
(scripts/api_v2_reference.py records the answers in fixtures/api_v2_reference_probes.json) and against
our server (test_api_v2_matches_reference.py compares). Each probe returns plain data: statuses, error
codes and the few fields the contract fixes, never ids or times."""

from __future__ import annotations

import asyncio
import io
import uuid
from typing import Any

import aiohttp
import blake3
from PIL import Image

TERMINAL = ("succeeded", "failed", "canceled", "expired")
STEPS = {
    "1": {"class_type": "TNumber", "inputs": {"value": 9}},
    "2": {"class_type": "TStepSave", "inputs": {"value": ["1", 0], "prefix": "probe", "steps": 2, "seconds": 0.01}},
}


def png(color: tuple[int, int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (6, 6), color).save(buf, format="PNG")
    return buf.getvalue()


async def answer(resp: aiohttp.ClientResponse) -> dict:
    """status, and the error envelope's code (None when the body is not one)."""
    out: dict[str, Any] = {"status": resp.status}
    try:
        body = await resp.json(content_type=None)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        out["code"] = body["error"].get("code")
        out["envelope"] = {"code", "message"} <= set(body["error"])
    return out


def upload_form(data: bytes, file_path: str, **fields: str) -> aiohttp.FormData:
    form = aiohttp.FormData()
    form.add_field("content_type", "image/png")
    form.add_field("file_path", file_path)
    for key, value in fields.items():
        form.add_field(key, value)
    form.add_field("file", data, filename=file_path, content_type="image/png")
    return form


async def run_probes(session: Any, headers: dict | None = None) -> dict[str, Any]:
    """Every probe's answer. `session.request(method, path, ...)` with paths relative to the server."""
    h = headers or {}

    async def req(method: str, path: str, **kw: Any) -> aiohttp.ClientResponse:
        return await session.request(method, path, headers={**h, **kw.pop("headers", {})}, **kw)

    out: dict[str, Any] = {}
    missing = str(uuid.uuid4())
    out["submit_ui_format"] = await answer(
        await req("POST", "/api/v2/jobs", json={"workflow": {"nodes": [], "links": []}})
    )
    out["submit_unknown_node"] = await answer(
        await req("POST", "/api/v2/jobs", json={"workflow": {"1": {"class_type": "NoSuchNode", "inputs": {}}}})
    )
    out["submit_no_workflow"] = await answer(await req("POST", "/api/v2/jobs", json={}))
    out["submit_missing_asset"] = await answer(
        await req(
            "POST",
            "/api/v2/jobs",
            json={
                "workflow": {
                    "1": {
                        "class_type": "TCopyInput",
                        "inputs": {"image": {"__type": "core/ASSET", "info": {"id": missing}}, "prefix": "p"},
                    }
                }
            },
        )
    )
    out["submit_malformed_asset_ref"] = await answer(
        await req(
            "POST",
            "/api/v2/jobs",
            json={
                "workflow": {
                    "1": {"class_type": "TCopyInput", "inputs": {"image": {"__type": "core/ASSET"}, "prefix": "p"}}
                }
            },
        )
    )
    key = f"probe-{uuid.uuid4()}"
    first = await req("POST", "/api/v2/jobs", json={"workflow": STEPS}, headers={"Idempotency-Key": key})
    job = await first.json()
    out["submit"] = {
        "status": first.status,
        "job_status": job["status"] in ("queued", "running"),
        "fields": sorted(
            k
            for k in job
            if k
            in (
                "id",
                "status",
                "created_at",
                "started_at",
                "completed_at",
                "expires_at",
                "queue_position",
                "progress",
                "outputs",
                "error",
                "urls",
            )
        ),
    }
    out["submit_same_key"] = await answer(
        await req("POST", "/api/v2/jobs", json={"workflow": STEPS}, headers={"Idempotency-Key": key})
    )
    seen = []
    for _ in range(600):
        polled = await (await req("GET", f"/api/v2/jobs/{job['id']}")).json()
        if not seen or seen[-1] != polled["status"]:
            seen.append(polled["status"])
        if polled["status"] in TERMINAL:
            break
        await asyncio.sleep(0.05)
    final = polled["outputs"][0] if polled["outputs"] else {}
    out["lifecycle"] = {
        "ends": seen[-1],
        "transitions_allowed": all(s in ("queued", "running", "succeeded") for s in seen),
        "output": {k: final.get(k) for k in ("node_id", "name", "type", "content_type")},
    }
    out["cancel_finished"] = {
        "status": (r := await req("POST", f"/api/v2/jobs/{job['id']}/cancel")).status,
        "job_status": (await r.json())["status"],
    }
    wf = await req("GET", f"/api/v2/jobs/{job['id']}/workflow")
    out["workflow"] = {"status": wf.status, "format": (await wf.json()).get("format")}
    listed = await req("GET", "/api/v2/jobs")
    out["list"] = {"status": listed.status, "has_job": job["id"] in [j["id"] for j in (await listed.json())["jobs"]]}
    out["list_limit_101"] = await answer(await req("GET", "/api/v2/jobs?limit=101"))
    out["list_limit_0"] = await answer(await req("GET", "/api/v2/jobs?limit=0"))
    for name, method, path in (
        ("job_unknown", "GET", f"/api/v2/jobs/{missing}"),
        ("cancel_unknown", "POST", f"/api/v2/jobs/{missing}/cancel"),
        ("events_unknown", "GET", f"/api/v2/jobs/{missing}/events"),
        ("workflow_unknown", "GET", f"/api/v2/jobs/{missing}/workflow"),
        ("asset_unknown", "GET", f"/api/v2/assets/{missing}"),
        ("content_unknown", "GET", f"/api/v2/assets/{missing}/content"),
    ):
        out[name] = await answer(await req(method, path))

    data = png((uuid.uuid4().int % 256, 3, 4))  # bytes new to the server on every run
    digest = "blake3:" + blake3.blake3(data).hexdigest()
    out["head_by_hash_unknown"] = {"status": (await req("HEAD", f"/api/v2/assets/by-hash/{digest}")).status}
    out["from_hash_unknown"] = await answer(await req("POST", "/api/v2/assets/from-hash", json={"hash": digest}))
    out["upload_hash_mismatch"] = await answer(
        await req("POST", "/api/v2/assets", data=upload_form(data, "probe.png", expected_hash="blake3:" + "0" * 64))
    )
    up = await req("POST", "/api/v2/assets", data=upload_form(data, "probe.png", expected_hash=digest))
    asset = await up.json()
    out["upload"] = {
        "status": up.status,
        "created_new": asset.get("created_new"),
        "hash": asset.get("hash") == digest,
        "size_bytes": asset.get("size_bytes") == len(data),
        "content_type": asset.get("content_type"),
    }
    again = await req("POST", "/api/v2/assets", data=upload_form(data, "probe.png"))
    out["upload_again"] = {"status": again.status, "created_new": (await again.json()).get("created_new")}
    out["head_by_hash_known"] = {"status": (await req("HEAD", f"/api/v2/assets/by-hash/{digest}")).status}
    minted = await req("POST", "/api/v2/assets/from-hash", json={"hash": digest})
    out["from_hash_known"] = {
        "status": minted.status in (200, 201),
        "hash": (await minted.json()).get("hash") == digest,
    }
    url = f"/api/v2/assets/{asset['id']}/content"
    whole = await req("GET", url)
    out["content"] = {"status": whole.status, "same": await whole.read() == data}
    part = await req("GET", url, headers={"Range": "bytes=2-5"})
    out["content_range"] = {
        "status": part.status,
        "same": await part.read() == data[2:6],
        "content_range": part.headers.get("Content-Range") == f"bytes 2-5/{len(data)}",
    }
    out["content_range_unsatisfiable"] = {
        "status": (await req("GET", url, headers={"Range": f"bytes={len(data) + 10}-"})).status
    }
    return out
