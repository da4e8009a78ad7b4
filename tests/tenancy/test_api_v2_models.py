"""A tenant brings its own model through POST /api/v2/assets (`models/<folder>/<name>.safetensors`): the
file lands in the tenant's own model folder, only after its safetensors header is parsed (nothing is
ever unpickled), never over another file and never outside the folder; the tenant's loaders find it
by name or by core/ASSET reference, and no other tenant sees it."""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import struct

from aiohttp import FormData


def safetensors(values: bytes = b"\x00" * 8, meta: dict | None = None) -> bytes:
    header = {"w": {"dtype": "F32", "shape": [len(values) // 4], "data_offsets": [0, len(values)]}}
    if meta:
        header["__metadata__"] = meta
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + values


def form(data: bytes, file_path: str) -> FormData:
    f = FormData()
    f.add_field("file_path", file_path)
    f.add_field("content_type", "application/octet-stream")
    f.add_field("file", data, filename=os.path.basename(file_path), content_type="application/octet-stream")
    return f


class Exploit:
    """Unpickling this writes a marker file: a server that unpickles an upload would leave it behind."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


async def finished(c, auth, job_id: str) -> dict:
    for _ in range(400):
        job = await (await c.get(f"/api/v2/jobs/{job_id}", headers=auth)).json()
        if job["status"] in ("succeeded", "failed", "canceled"):
            return job
        await asyncio.sleep(0.05)
    raise TimeoutError(job_id)


async def test_model_upload_lands_in_the_tenants_folder_only(hosted):
    alice, bob = hosted.add("alice"), hosted.add("bob")
    c = hosted.client
    lora = safetensors(b"\x01\x02\x03\x04" * 4, {"note": "alice's"})
    resp = await c.post("/api/v2/assets", data=form(lora, "models/loras/mine.safetensors"), headers=alice)
    assert resp.status == 201, await resp.text()
    asset = await resp.json()
    ws = hosted.server.workspace.root
    assert (ws / "models" / "tenants" / "alice" / "loras" / "mine.safetensors").read_bytes() == lora
    assert not (ws / "models" / "loras" / "mine.safetensors").exists()  # the shared folder is untouched
    assert "mine.safetensors" in await (await c.get("/models/loras", headers=alice)).json()
    assert "mine.safetensors" not in await (await c.get("/models/loras", headers=bob)).json()

    by_ref = {
        "1": {
            "class_type": "TCopyModel",
            "inputs": {"lora_name": {"__type": "core/ASSET", "info": {"id": asset["id"]}}, "prefix": "byref"},
        }
    }
    by_name = {"1": {"class_type": "TCopyModel", "inputs": {"lora_name": "mine.safetensors", "prefix": "byname"}}}
    for workflow in (by_ref, by_name):
        job_id = (await (await c.post("/api/v2/jobs", json={"workflow": workflow}, headers=alice)).json())["id"]
        job = await finished(c, alice, job_id)
        assert job["status"] == "succeeded", job
        assert await (await c.get(f"/api/v2/assets/{job['outputs'][0]['id']}/content", headers=alice)).read() == lora
    # Bob names the file: his loaders do not see it; his reference to Alice's asset is refused.
    resp = await c.post("/api/v2/jobs", json={"workflow": by_name}, headers=bob)
    assert (await finished(c, bob, (await resp.json())["id"]))["status"] == "failed"
    resp = await c.post("/api/v2/jobs", json={"workflow": by_ref}, headers=bob)
    assert resp.status == 422 and (await resp.json())["error"]["code"] == "missing_asset"


async def test_model_upload_refusals(hosted, tmp_path):
    auth = hosted.add("alice")
    c = hosted.client
    marker = tmp_path / "unpickled"
    evil = pickle.dumps(Exploit(str(marker)))
    cases = {
        "models/loras/evil.safetensors": evil,  # a pickle under a safetensors name
        "models/loras/evil.ckpt": safetensors(),  # only .safetensors
        "models/loras/../../../x.safetensors": safetensors(),  # traversal
        "models/loras/sub/x.safetensors": safetensors(),  # one level only
        "models/custom_nodes/x.safetensors": safetensors(),  # not a model folder
        "models/loras/short.safetensors": safetensors()[:-3],  # tensors' data cut short
        "models/loras/long.safetensors": safetensors() + b"extra",  # bytes beyond the tensors
    }
    for file_path, data in cases.items():
        resp = await c.post("/api/v2/assets", data=form(data, file_path), headers=auth)
        assert resp.status == 422 and (await resp.json())["error"]["code"] == "invalid_request", file_path
    assert not marker.exists()  # never unpickled
    root = hosted.server.workspace.root
    assert not list((root / "models").rglob("*.safetensors")) and not list((root / "models").rglob("*.ckpt"))

    first = safetensors(b"\x01" * 8)
    assert (await c.post("/api/v2/assets", data=form(first, "models/loras/a.safetensors"), headers=auth)).status == 201
    resp = await c.post(
        "/api/v2/assets", data=form(safetensors(b"\x02" * 8), "models/loras/a.safetensors"), headers=auth
    )
    assert resp.status == 409 and (await resp.json())["error"]["code"] == "hash_mismatch"  # no clobbering
    target = root / "models" / "tenants" / "alice" / "loras" / "a.safetensors"
    assert target.read_bytes() == first
    same = await c.post("/api/v2/assets", data=form(first, "models/loras/a.safetensors"), headers=auth)
    assert same.status == 200 and (await same.json())["created_new"] is False
    assert [p.name for p in target.parent.iterdir()] == ["a.safetensors"]  # no temporary file left


async def test_models_count_towards_the_tenants_storage(hosted):
    auth = hosted.add("alice", max_storage_bytes=300)
    c = hosted.client
    lora = safetensors(b"\x05" * 160)
    assert len(lora) < 300 < 2 * len(lora)
    first = await c.post("/api/v2/assets", data=form(lora, "models/loras/one.safetensors"), headers=auth)
    assert first.status == 201
    second = await c.post(
        "/api/v2/assets", data=form(safetensors(b"\x06" * 160), "models/loras/two.safetensors"), headers=auth
    )
    assert second.status == 413 and (await second.json())["error"]["code"] == "payload_too_large"
    folder = hosted.server.workspace.root / "models" / "tenants" / "alice" / "loras"
    assert [p.name for p in folder.iterdir()] == ["one.safetensors"]
