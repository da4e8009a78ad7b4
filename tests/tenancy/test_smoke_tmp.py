import pytest
import tenant_nodes as tn

async def test_smoke(hosted):
    a = hosted.add("alice")
    r = await hosted.client.get("/queue")
    assert r.status == 401
    out = await hosted.post_prompt("alice", tn.prompt(3))
    h = await hosted.wait_history("alice", out["prompt_id"])
    print(h)
    assert h["status"]["status_str"] == "success"
