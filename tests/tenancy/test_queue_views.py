"""A tenant's /queue and /history are answered from memory, kept in step with the store: every change
(put, claim, finish, delete, wipe) reads back exactly as the store has it, with ComfyUI's paging, and
their encoded bodies (joined from cached JSON text per entry) are the same JSON."""

from __future__ import annotations

import itertools
import json

from comfy_bridge.server.prompt_queue import QueueItem
from comfy_bridge.tenancy import tenant_context as context
from comfy_bridge.tenancy.store import Store
from comfy_bridge.tenancy.tenant_queue import TenantQueue

PAGES = [(None, -1), (2, -1), (0, -1), (3, 1), (None, 2), (-1, 1), (100, 0), (2, 100)]


def _same_as_store(queue: TenantQueue, store: Store, tenant: str | None) -> None:
    """The views of `tenant` (None: every tenant's, as an unscoped reader sees them) read as the store."""
    with context.scoped(tenant):
        rows = store.queue_rows(tenant)
        assert queue.get_current_queue() == (
            [r.item for r in rows if r.running],
            [r.item for r in rows if not r.running],
        )
        for max_items, offset in PAGES:
            assert queue.get_history(max_items=max_items, offset=offset) == store.history(
                tenant, None, max_items, offset
            )
            assert list(queue.get_history(max_items=max_items, offset=offset)) == list(
                store.history(tenant, None, max_items, offset)
            )
        for prompt_id in [*store.history(tenant), "nothing"]:
            assert queue.get_history(prompt_id=prompt_id) == store.history(tenant, prompt_id)
        # The routes' encoded bodies (each entry's JSON text cached) read as the views' JSON, byte for byte.
        assert queue.encoded_queue().decode() == json.dumps(
            {
                "queue_running": [r.item for r in rows if r.running],
                "queue_pending": [r.item for r in rows if not r.running],
            }
        )
        for max_items, offset in PAGES:
            assert queue.encoded_history(max_items, offset).decode() == json.dumps(
                store.history(tenant, None, max_items, offset)
            )


def test_views_follow_every_change(tmp_path):
    store = Store(tmp_path / "s.db")
    for name in ("alice", "bob"):
        store.add_tenant(name)
    queue = TenantQueue(store, max_history=4)
    numbers = itertools.count()

    def put(tenant: str, n: int) -> None:
        with context.scoped(tenant):
            for _ in range(n):
                i = next(numbers)
                queue.put(QueueItem(i if i % 3 else -i, f"p{i}", {"1": {"class_type": "X", "inputs": {}}}, {}, ["1"]))

    put("alice", 3)
    _same_as_store(queue, store, "alice")  # loaded now, then kept in step
    _same_as_store(queue, store, None)
    put("alice", 4)
    put("bob", 2)
    for _ in range(6):
        _same_as_store(queue, store, "alice")
        item, task = queue.get(timeout=0)
        _same_as_store(queue, store, "alice")  # one running
        _same_as_store(queue, store, None)
        queue.task_done(task, {"outputs": {"2": {"images": [{"filename": f"{item.prompt_id}.png"}]}}}, None)
    _same_as_store(queue, store, "alice")
    _same_as_store(queue, store, "bob")
    _same_as_store(queue, store, None)
    with context.scoped("alice"):
        assert len(queue.get_history()) == 4  # trimmed to max_history, as the store is
        pending = queue.get_current_queue()[1]
        assert queue.delete_queue_item(lambda item: item.prompt_id == pending[0][1])
        queue.delete_history_item(next(iter(queue.get_history())))
    _same_as_store(queue, store, "alice")
    _same_as_store(queue, store, None)
    with context.scoped("bob"):
        queue.wipe_queue()
        queue.wipe_history()
    _same_as_store(queue, store, "bob")
    _same_as_store(queue, store, "alice")
    _same_as_store(queue, store, None)
    with context.scoped("alice"):
        assert queue.get_current_queue()[1] and queue.get_history()


def test_unscoped_changes_reach_every_view(tmp_path):
    store = Store(tmp_path / "s.db")
    queue = TenantQueue(store, max_history=3)
    for i in range(5):
        with context.scoped("alice" if i % 2 else None):
            queue.put(QueueItem(i, f"u{i}", {"1": {"class_type": "X", "inputs": {}}}, {}, ["1"]))
    for scope in ("alice", None):
        _same_as_store(queue, store, scope)
    for _ in range(4):
        item, task = queue.get(timeout=0)
        queue.task_done(task, {"outputs": {}}, None)
        for scope in ("alice", None):
            _same_as_store(queue, store, scope)
    queue.delete_history_item("u1")  # unscoped: wherever it is
    queue.wipe_queue()
    for scope in ("alice", None):
        _same_as_store(queue, store, scope)
    queue.wipe_history()
    for scope in ("alice", None):
        _same_as_store(queue, store, scope)
