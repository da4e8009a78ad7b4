"""GET /queue and GET /history cost little while nothing changes: the hosted server builds each answer
once per change of the caller's queue or history and then serves those very bytes to every poll, with no
SQLite read (polling clients had taken the CPU that executing prompts needed). A change is seen by the
next poll."""

from __future__ import annotations

import json

import pytest
import tenant_nodes as tn

from comfy_bridge.tenancy import tenant_context as context
from nodes import progress


@pytest.mark.parametrize("tenant", ["alice", None])  # a tenant, and the single user of a server with none
async def test_polls_of_an_unchanged_queue_are_served_from_one_build(hosted, tenant, monkeypatch):
    headers = hosted.add(tenant) if tenant else {}
    queue = hosted.server.prompt_queue
    hosted.server.read_pacer.interval_s = 0  # what a poll costs, not how often one is answered (test_read_pacing)

    async def post(value: int, **extra) -> str:
        resp = await hosted.client.post("/prompt", json={"prompt": tn.prompt(value, **extra)}, headers=headers)
        assert resp.status == 200, await resp.text()
        return (await resp.json())["prompt_id"]

    first = await post(0, slow=60)  # holds the worker: nothing below changes by itself
    for value in range(1, 31):
        await post(value)
    done = await post(99, prefix="done")
    reads = []
    for name in ("queue_rows", "history", "queue_counts"):
        real = getattr(hosted.store, name)
        monkeypatch.setattr(
            hosted.store, name, lambda *a, _real=real, _name=name, **k: (reads.append(_name), _real(*a, **k))[1]
        )

    paths = ("/queue", "/history", "/history?max_items=5")
    bodies = {path: [] for path in paths}
    for _ in range(25):
        for path in paths:
            resp = await hosted.client.get(path, headers=headers)
            assert resp.status == 200
            bodies[path].append(await resp.read())
    queued = json.loads(bodies["/queue"][0])
    assert len(queued["queue_pending"]) == 31 and queued["queue_running"][0][1] == first
    assert reads == []  # no SQLite read for any poll
    for path in paths:
        assert len(set(bodies[path])) == 1, path
    with context.scoped(tenant):  # what the routes send: the very same bytes, built once per change
        assert queue.encoded_queue() is queue.encoded_queue()
        assert queue.encoded_history(5) is queue.encoded_history(5)
    builds = queue.views.builds
    for _ in range(25):
        for path in paths:
            await (await hosted.client.get(path, headers=headers)).read()
    assert queue.views.builds == builds

    # a change is seen by the next poll
    progress.interrupt(True)  # the slow prompt ends; the others run
    await hosted.wait_history(tenant, done)
    progress.interrupt(False)
    after = json.loads(await (await hosted.client.get("/queue", headers=headers)).read())
    assert after == {"queue_running": [], "queue_pending": []}
    history = json.loads(await (await hosted.client.get("/history", headers=headers)).read())
    assert first in history and done in history
