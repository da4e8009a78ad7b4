"""A prompt id names one prompt of one tenant, decided atomically by the store's database: two tenants
posting the same fresh id at the same moment get one 200 and one 409, a tenant cannot queue an id that
another tenant's history holds, and so no tenant can replace another's finished entry (which the single
history row per id used to allow: after a restart the first tenant's entry was gone)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading

import pytest
import tenant_nodes as tn

from comfy_bridge.server.prompt_queue import DuplicatePromptId
from comfy_bridge.tenancy import store as store_mod
from comfy_bridge.tenancy.store import Store


async def _post(hosted, name: str, prompt_id: str, value: int, slow: float | None = None):
    resp = await hosted.client.post(
        "/prompt",
        json={"prompt": tn.prompt(value, prefix=name, slow=slow), "prompt_id": prompt_id},
        headers=hosted.auth(name),
    )
    return resp.status, await resp.json()


async def test_an_id_in_use_is_refused_with_409_and_nothing_is_replaced(hosted):
    hosted.add("alice"), hosted.add("bob")
    status, _ = await _post(hosted, "alice", "shared", 1, slow=0.3)
    assert status == 200
    for name in ("bob", "alice"):  # queued: refused to the other tenant and to its own tenant again
        status, body = await _post(hosted, name, "shared", 2)
        assert status == 409, body
        assert body["error"]["type"] == "prompt_id_in_use" and "shared" in body["error"]["details"]
        assert body["node_errors"] == {}
    entry = await hosted.wait_history("alice", "shared")
    status, _ = await _post(hosted, "bob", "shared", 3)  # finished: still alice's
    assert status == 409
    queued = await (await hosted.client.get("/queue", headers=hosted.auth("bob"))).json()
    assert queued == {"queue_running": [], "queue_pending": []}
    assert await (await hosted.client.get("/history/shared", headers=hosted.auth("bob"))).json() == {}
    assert hosted.store.history("alice")["shared"] == entry  # in the durable store, as a restart reads it
    assert hosted.store.history("bob") == {}


async def test_two_tenants_racing_for_a_fresh_id_one_wins(hosted):
    hosted.add("alice"), hosted.add("bob")
    winners = []
    for i in range(20):
        results = await asyncio.gather(_post(hosted, "alice", f"race-{i}", i), _post(hosted, "bob", f"race-{i}", i))
        assert sorted(status for status, _ in results) == [200, 409], results
        winners.append("alice" if results[0][0] == 200 else "bob")
    for i, owner in enumerate(winners):  # every accepted prompt finishes, in the history of the tenant that won it
        await hosted.wait_history(owner, f"race-{i}")
    for name in ("alice", "bob"):
        assert sorted(hosted.store.history(name)) == sorted(f"race-{i}" for i, w in enumerate(winners) if w == name)


def test_the_database_decides_between_two_connections(tmp_path):
    """Two Store objects (two connections, as two processes) inserting the same ids at once."""
    stores = [Store(tmp_path / "state.sqlite3", scrypt_n=2**10) for _ in range(2)]
    wins = {0: 0, 1: 0}
    start = threading.Barrier(2)

    def add(k: int) -> None:
        start.wait()
        for i in range(200):
            try:
                stores[k].queue_add(f"t{k}", f"id-{i}", i, [i, f"id-{i}", {}, {}, []])
                wins[k] += 1
            except DuplicatePromptId:
                pass

    threads = [threading.Thread(target=add, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wins[0] + wins[1] == 200
    rows = stores[0].queue_rows()
    assert sorted(r.prompt_id for r in rows) == sorted(f"id-{i}" for i in range(200))

    # Finished by its tenant, the id stays that tenant's: the other cannot queue it, and the entry
    # survives a restart (a new Store on the file).
    row = next(r for r in rows if r.prompt_id == "id-0")
    stores[0].finish(row.id, row.prompt_id, row.tenant, {"outputs": {"mine": 1}}, 100)
    other = "t1" if row.tenant == "t0" else "t0"
    with pytest.raises(DuplicatePromptId):
        stores[1].queue_add(other, "id-0", 0, [0, "id-0", {}, {}, []])
    stores[0].queue_add(row.tenant, "id-0", 0, [0, "id-0", {}, {}, []])  # its own re-run may
    for s in stores:
        s.close()
    reopened = Store(tmp_path / "state.sqlite3", scrypt_n=2**10)
    assert reopened.history(row.tenant)["id-0"] == {"outputs": {"mine": 1}}
    assert reopened.history(other) == {}
    reopened.close()


def test_an_older_store_with_shared_ids_is_repaired_at_start(tmp_path):
    db = sqlite3.connect(tmp_path / "state.sqlite3", isolation_level=None)
    db.executescript(store_mod._SCHEMA)  # the tables as an older version left them, with no id rules
    for tenant in ("a", "b", "a"):
        db.execute(
            "INSERT INTO queue (tenant, prompt_id, number, item) VALUES (?, 'dup', 1, ?)",
            (tenant, json.dumps([1, "dup", {}, {}, []])),
        )
    db.execute("INSERT INTO history (prompt_id, tenant, entry) VALUES ('done', 'a', '{}')")
    db.execute(
        "INSERT INTO queue (tenant, prompt_id, number, item) VALUES ('b', 'done', 2, ?)",
        (json.dumps([2, "done", {}, {}, []]),),
    )
    db.close()
    store = Store(tmp_path / "state.sqlite3", scrypt_n=2**10)
    rows = store.queue_rows()
    assert len(rows) == 4 and len({r.prompt_id for r in rows}) == 4
    assert [r.prompt_id for r in rows if r.tenant == "a"][0] == "dup"  # the first keeps its id
    assert all(r.item[1] == r.prompt_id for r in rows)
    assert "done" not in {r.prompt_id for r in rows}
    with pytest.raises(DuplicatePromptId):
        store.queue_add("b", "dup", 3, [3, "dup", {}, {}, []])
    store.close()
