"""The engine's output cache is per tenant: a prompt cached for one tenant runs afresh for another
(and writes into that tenant's folder), while repeating it for the same tenant is a cache hit."""

from __future__ import annotations

import tenant_nodes as tn


async def test_no_cache_hit_across_tenants(hosted, workspace):
    hosted.add("alice")
    hosted.add("bob")
    first = await hosted.post_prompt("alice", tn.prompt(7, prefix="cached"))
    await hosted.wait_history("alice", first["prompt_id"])
    assert tn.RUNS == [7]
    again = await hosted.post_prompt("alice", tn.prompt(7, prefix="cached"))
    entry = await hosted.wait_history("alice", again["prompt_id"])
    assert tn.RUNS == [7]  # same tenant: served from its cache
    cached = dict(entry["status"]["messages"])["execution_cached"]["nodes"]
    assert "1" in cached

    other = await hosted.post_prompt("bob", tn.prompt(7, prefix="cached"))
    entry = await hosted.wait_history("bob", other["prompt_id"])
    assert tn.RUNS == [7, 7]  # other tenant: executed again, nothing reused
    assert dict(entry["status"]["messages"])["execution_cached"]["nodes"] == []
    assert (workspace.output_dir / "tenants" / "bob" / "cached_7.png").is_file()
    resp = await hosted.client.get("/view?filename=cached_7.png", headers=hosted.auth("bob"))
    assert resp.status == 200
