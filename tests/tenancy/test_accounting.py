"""Per-tenant accounting: GPU time, prompts, images and bytes stored at
GET /cluster/tenants/{name}/usage (the tenant itself or an admin) and in /metrics (admins only on a
hosted server); GPU time is the cluster scheduler's vTime x weight when a cluster head runs."""

from __future__ import annotations

import aiohttp
import tenant_nodes as tn
from prometheus_client.parser import text_string_to_metric_families

from comfy_bridge.server.cluster_stats import EMPTY
from comfy_bridge.tenancy.tenant_folders import storage_bytes


def _samples(text: str) -> dict:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


async def test_usage_counts_time_images_and_bytes_per_tenant(hosted, workspace):
    alice, bob = hosted.add("alice", weight=2.0), hosted.add("bob")
    root = hosted.add("root", admin=True)
    client = hosted.client
    ids = [(await hosted.post_prompt("alice", tn.prompt(i, prefix="acct", slow=0.2)))["prompt_id"] for i in (1, 2, 3)]
    for pid in ids:
        await hosted.wait_history("alice", pid)
    form = aiohttp.FormData()
    form.add_field("image", b"u" * 1000, filename="up.bin")
    assert (await client.post("/upload/image", data=form, headers=alice)).status == 200

    usage = await (await client.get("/cluster/tenants/alice/usage", headers=alice)).json()
    assert usage["prompts"] == 3 and usage["images"] == 3
    assert usage["gpu_time_source"] == "server"
    assert 0.6 <= usage["gpu_seconds"] < 10 and usage["gpu_seconds"] == usage["server_seconds"]
    assert abs(usage["vtime"] - usage["gpu_seconds"] / 2.0) < 1e-9
    on_disk = storage_bytes(hosted.server.tenant_workspace.tenant_folders("alice"))
    assert usage["stored_bytes"] == on_disk and on_disk > 1000
    assert usage["pending"] == 0 and usage["running"] == 0 and usage["limits"]["weight"] == 2.0

    mine = await (await client.get("/cluster/tenants/bob/usage", headers=bob)).json()
    assert (mine["prompts"], mine["images"], mine["gpu_seconds"], mine["stored_bytes"]) == (0, 0, 0.0, 0)
    assert (await client.get("/cluster/tenants/alice/usage", headers=bob)).status == 403
    assert [r["tenant"] for r in (await (await client.get("/cluster/tenants", headers=bob)).json())["tenants"]] == [
        "bob"
    ]

    # An admin reads everyone's usage and the metrics; a tenant may not.
    assert (await (await client.get("/cluster/tenants/alice/usage", headers=root)).json())["images"] == 3
    rows = (await (await client.get("/cluster/tenants", headers=root)).json())["tenants"]
    assert sorted(r["tenant"] for r in rows) == ["alice", "bob", "root"]
    for path in ("/metrics", "/cluster/stats", "/api/metrics"):
        assert (await client.get(path, headers=bob)).status == 403, path
    assert (await client.get("/metrics")).status == 401
    resp = await client.get("/metrics", headers=root)
    assert resp.status == 200
    samples = _samples(await resp.text())
    assert samples[("comfy_cluster_tenant_images_total", (("tenant", "alice"),))] == 3
    assert samples[("comfy_cluster_tenant_prompts_total", (("tenant", "alice"),))] == 3
    assert samples[("comfy_cluster_tenant_images_total", (("tenant", "bob"),))] == 0
    assert samples[("comfy_cluster_tenant_stored_bytes", (("tenant", "alice"),))] == on_disk
    gpu = samples[("comfy_cluster_tenant_gpu_seconds", (("source", "server"), ("tenant", "alice")))]
    assert abs(gpu - usage["gpu_seconds"]) < 1e-6


async def test_gpu_time_comes_from_the_cluster_scheduler_when_a_head_runs(hosted):
    alice, root = hosted.add("alice"), hosted.add("root", admin=True)

    class Head:
        def stats(self):
            return {**EMPTY, "tenants": {"alice": {"vtime": 1.25, "weight": 4.0, "queued": 0, "running": 0}}}

    hosted.server.config.cluster_head = Head()
    usage = await (await hosted.client.get("/cluster/tenants/alice/usage", headers=alice)).json()
    assert (usage["gpu_time_source"], usage["vtime"], usage["gpu_seconds"]) == ("cluster", 1.25, 5.0)
    samples = _samples(await (await hosted.client.get("/metrics", headers=root)).text())
    assert samples[("comfy_cluster_tenant_gpu_seconds", (("source", "cluster"), ("tenant", "alice")))] == 5.0
    assert samples[("comfy_cluster_tenant_vtime", (("tenant", "alice"),))] == 1.25  # the head's own family
    assert samples[("comfy_cluster_tenant_gpu_seconds", (("source", "cluster"), ("tenant", "root")))] == 0.0


def test_admin_flag_from_the_cli_and_an_old_store(tmp_path):
    import sqlite3

    from comfy_bridge.cli import main
    from comfy_bridge.tenancy.store import Store

    db = tmp_path / "old.sqlite3"
    with sqlite3.connect(db) as old:  # a store from before the admin column
        old.execute(
            "CREATE TABLE tenants (name TEXT PRIMARY KEY, weight REAL NOT NULL DEFAULT 1.0, created REAL "
            "NOT NULL, max_queued INTEGER, max_concurrent INTEGER, max_prompt_bytes INTEGER, max_nodes "
            "INTEGER, max_upload_bytes INTEGER, max_storage_bytes INTEGER)"
        )
        old.execute("INSERT INTO tenants (name, created) VALUES ('legacy', 0)")
    assert main(["tenants", "--state-db", str(db), "add", "ops", "--admin"]) == 0
    assert main(["tenants", "--state-db", str(db), "set", "legacy", "--admin"]) == 0
    assert main(["tenants", "--state-db", str(db), "add", "plain"]) == 0
    store = Store(db)
    assert [(t.name, t.admin) for t in store.list_tenants()] == [("legacy", True), ("ops", True), ("plain", False)]
    store.close()
    assert main(["tenants", "--state-db", str(db), "set", "legacy", "--no-admin"]) == 0
    store = Store(db)
    assert store.get_tenant("legacy").admin is False
    store.close()
