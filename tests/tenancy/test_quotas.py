"""Over a tenant's limit the answer is 429 (queued prompts) or 413 (sizes, storage) naming the
limit; under it the same request goes through."""

from __future__ import annotations

import aiohttp
import tenant_nodes as tn


async def _status_and_limit(resp) -> tuple[int, str]:
    body = await resp.json()
    assert body["error"]["extra_info"]["limit"] in body["error"]["message"]
    return resp.status, body["error"]["extra_info"]["limit"]


async def test_queued_prompt_limit_is_429(hosted):
    alice = hosted.add("alice", max_queued=2)
    slow = await hosted.post_prompt("alice", tn.prompt(1, slow=30))
    second = await hosted.post_prompt("alice", tn.prompt(2))
    resp = await hosted.client.post("/prompt", json={"prompt": tn.prompt(3)}, headers=alice)
    assert await _status_and_limit(resp) == (429, "max_queued")
    assert "Retry-After" in resp.headers
    await hosted.wait_running("alice", slow["prompt_id"])
    await hosted.client.post("/interrupt", json={}, headers=alice)
    await hosted.wait_history("alice", slow["prompt_id"])
    await hosted.wait_history("alice", second["prompt_id"])
    resp = await hosted.client.post("/prompt", json={"prompt": tn.prompt(3)}, headers=alice)
    assert resp.status == 200


async def test_prompt_size_and_node_count_are_413(hosted):
    small = hosted.add("small", max_nodes=2, max_prompt_bytes=400)
    big_prompt = {**tn.prompt(1), "3": {"class_type": "TNumber", "inputs": {"value": 2}}}
    resp = await hosted.client.post("/prompt", json={"prompt": big_prompt}, headers=small)
    assert await _status_and_limit(resp) == (413, "max_nodes")
    resp = await hosted.client.post(
        "/api/prompt", json={"prompt": tn.prompt(1), "extra_data": {"x": "y" * 500}}, headers=small
    )
    assert await _status_and_limit(resp) == (413, "max_prompt_bytes")
    assert (await hosted.client.post("/prompt", json={"prompt": tn.prompt(1)}, headers=small)).status == 200


def _upload(data: bytes, name: str) -> aiohttp.FormData:
    form = aiohttp.FormData()
    form.add_field("image", data, filename=name)
    return form


async def test_upload_size_and_storage_are_413(hosted):
    alice = hosted.add("alice", max_upload_bytes=2000, max_storage_bytes=3000)
    resp = await hosted.client.post("/upload/image", data=_upload(b"x" * 2500, "big.png"), headers=alice)
    assert await _status_and_limit(resp) == (413, "max_upload_bytes")
    resp = await hosted.client.post("/upload/image", data=_upload(b"a" * 1500, "one.png"), headers=alice)
    assert resp.status == 200
    resp = await hosted.client.post("/upload/image", data=_upload(b"b" * 1500, "two.png"), headers=alice)
    assert await _status_and_limit(resp) == (413, "max_storage_bytes")
    resp = await hosted.client.post("/userdata/notes.txt", data=b"c" * 1600, headers=alice)
    assert await _status_and_limit(resp) == (413, "max_storage_bytes")
    usage = await (await hosted.client.get("/cluster/tenants/alice/usage", headers=alice)).json()
    assert usage["stored_bytes"] == 1500 and usage["limits"]["max_storage_bytes"] == 3000
