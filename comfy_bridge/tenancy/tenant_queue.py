"""`TenantQueue`: the server's PromptQueue interface over the durable `Store`, scoped per tenant.

Route-facing methods (put, get_current_queue, history, delete, ...) act for the tenant of the
calling context (tenancy.context): a tenant sees and changes only its own entries; unscoped
(single-user) code sees all. Worker-facing methods (get, task_done, flags) are global: `get`
picks the next prompt fairly between tenants (least weighted service first, then the prompt's
number), skips tenants at their concurrency limit, and binds the worker thread to the tenant of
the prompt it hands out, so the engine, its files and its messages act for that tenant.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from typing import Any, Callable

from comfy_bridge.server.common import dumps_json
from comfy_bridge.server.prompt_queue import MAX_HISTORY, ExecutionStatus, QueueItem

from . import tenant_context as context
from .store import QueueRow, Store


class TenantQueue:
    def __init__(self, store: Store, on_change: Callable[[str | None], None] = lambda tenant: None,
                 max_history: int = MAX_HISTORY):
        """`on_change(tenant)`: the queue of `tenant` changed ("" the single-user rows; None every
        tenant's, as when unscoped code clears the whole queue), for its `status` message."""
        self.store = store
        self.output_claims = store   # a prompt re-run after a restart writes the files its dead run named
        self._on_change = on_change
        self._max_history = max_history
        self._cond = threading.Condition(threading.RLock())
        self._flags: dict[str, Any] = {}
        self._sensitive: dict[int, dict] = {}   # secrets stay in memory, never on disk
        self._running: dict[int, tuple[QueueRow, float]] = {}
        self._served: dict[str, float] = {}     # tenant -> seconds of service / weight (this process)
        # In-memory copies of a tenant's queue rows and history (oldest first), loaded on its first
        # read and then updated after each store write, under their own lock (never held across the
        # worker's store writes): every client re-reads /queue and /history on each status message,
        # and reading them from SQLite on the event loop, behind the worker's store lock (its commits
        # and WAL checkpoints), was the tail of those routes. Updates are idempotent, so one made
        # after a load that already saw its write changes nothing. Reads that span every tenant
        # (tenant None) go to the store.
        self._mirror = threading.Lock()
        self._queues: dict[str, dict[int, QueueRow]] = {}
        self._histories: dict[str, dict[str, dict]] = {}
        # The JSON text of each queue item and history entry, computed once (a client polls the same
        # entries over and over): key -> (the object it encodes, its text), valid while the mirror
        # still holds that very object, so an entry replaced or removed is never answered stale.
        self._encoded: dict[str, dict[Any, tuple[object, str]]] = {}
        self.resumed = store.requeue_running()
        store.repair_queue()

    # -- queue ---------------------------------------------------------------------------
    def put(self, item: QueueItem | tuple) -> None:
        item = item if isinstance(item, QueueItem) else QueueItem(*item)
        tenant = context.current()
        if tenant is not None:
            # The engine charges extra_data["tenant"]; a client must not pick whom it charges.
            item.extra_data["tenant"] = tenant
        with self._cond:
            row_id = self.store.queue_add(tenant or "", item.prompt_id, item.number, item.public())
            if item.sensitive:
                self._sensitive[row_id] = item.sensitive
            with self._mirror:
                rows = self._queues.get(tenant or "")
                if rows is not None:
                    rows[row_id] = QueueRow(row_id, tenant or "", item.prompt_id, item.number, item.public(), False)
            # the "status" of this enqueue goes out before a worker can take the item and announce
            # execution_start (ComfyUI's order; the lock is re-entrant)
            self._on_change(tenant)
            self._cond.notify()
        if tenant is not None:
            self.load(tenant)   # (routes run put off the event loop) so that the tenant's next reads find them

    def get(self, timeout: float | None = None) -> tuple[QueueItem, int] | None:
        with self._cond:
            row = self._next()
            if row is None:
                self._cond.wait(timeout)
                row = self._next()
            if row is None:
                return None
            self._running[row.id] = (row, time.perf_counter())
            sensitive = self._sensitive.pop(row.id, None)
            with self._mirror:
                rows = self._queues.get(row.tenant)
                if rows is not None and row.id in rows:
                    rows[row.id] = replace(rows[row.id], running=True)
        context.set_current(row.tenant)
        self._on_change(row.tenant)
        return QueueItem(*row.item, sensitive), row.id

    def _next(self) -> QueueRow | None:
        running = self.store.running_by_tenant()
        candidates = []
        for row in self.store.pending_heads():
            tenant = self.store.get_tenant(row.tenant) if row.tenant else None
            cap = tenant.max_concurrent if tenant is not None else None
            if cap is not None and running.get(row.tenant, 0) >= cap:
                continue
            candidates.append((self._served.get(row.tenant, 0.0), row.number, row.id, row))
        for *_, row in sorted(candidates, key=lambda c: c[:3]):
            if self.store.queue_claim(row.id):
                return row
        return None

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def task_done(self, task_id: int, history_result: dict, status: ExecutionStatus | None) -> None:
        with self._cond:
            row, started = self._running.pop(task_id)
            seconds = time.perf_counter() - started
            tenant = self.store.get_tenant(row.tenant) if row.tenant else None
            weight = tenant.weight if tenant is not None and tenant.weight > 0 else 1.0
            self._served[row.tenant] = self._served.get(row.tenant, 0.0) + seconds / weight
            result = history_result or {}
            outputs = result.get("outputs", {})
            entry = {"prompt": row.item, "outputs": outputs,
                     "status": status.as_dict() if status is not None else None, "meta": result.get("meta", {})}
            self.store.finish(row.id, row.prompt_id, row.tenant, entry, self._max_history)
            with self._mirror:
                self._queues.get(row.tenant, {}).pop(row.id, None)
                history = self._histories.get(row.tenant)
                if history is not None:   # as the store keeps it: the newest entry last, the oldest trimmed
                    history.pop(row.prompt_id, None)
                    history[row.prompt_id] = entry
                    for prompt_id in list(history)[:max(0, len(history) - self._max_history)]:
                        del history[prompt_id]
            self.store.add_usage(row.tenant, seconds, _count_images(outputs))
            self._cond.notify_all()   # a concurrency slot is free
        self._on_change(row.tenant)

    def get_current_queue(self) -> tuple[list[list], list[list]]:
        """(running, pending) items of the calling tenant; shared with the queue: do not change them."""
        rows = self._tenant_rows(context.current())
        return [r.item for r in rows if r.running], [r.item for r in rows if not r.running]

    def loaded(self, tenant: str) -> bool:
        """Whether the tenant's in-memory queue and history are loaded (its reads touch no SQLite)."""
        return tenant in self._queues and tenant in self._histories

    def load(self, tenant: str) -> None:
        """Load the tenant's in-memory queue and history from the store if they are not yet: a SQLite
        read and JSON decoding of every row, so callers on the event loop run it in a thread first
        (the hosted server's middleware does, for each request of a tenant not loaded yet): 20
        tenants' first reads at once stalled the loop for 200 ms."""
        if self.loaded(tenant):
            return
        with self._mirror:
            self._queue_mirror(tenant)
            self._history_mirror(tenant)

    def _queue_mirror(self, tenant: str) -> dict[int, QueueRow]:
        """The tenant's in-memory queue rows, loaded on first use; the caller holds self._mirror."""
        rows = self._queues.get(tenant)
        if rows is None:
            rows = self._queues[tenant] = {r.id: r for r in self.store.queue_rows(tenant)}
        return rows

    def _history_mirror(self, tenant: str) -> dict[str, dict]:
        """The tenant's in-memory history, loaded on first use; the caller holds self._mirror."""
        history = self._histories.get(tenant)
        if history is None:
            history = self._histories[tenant] = self.store.history(tenant)
        return history

    def _tenant_rows(self, tenant: str | None) -> list[QueueRow]:
        """The tenant's rows in queue order (number, then arrival), as store.queue_rows gives them."""
        if tenant is None:
            return self.store.queue_rows(None)
        with self._mirror:
            return sorted(self._queue_mirror(tenant).values(), key=lambda r: (r.number, r.id))

    def encoded_queue(self) -> str | None:
        """GET /queue's body for the calling tenant as JSON text (what json_response would write for
        get_current_queue), joined from each item's cached text; None for unscoped callers."""
        tenant = context.current()
        if tenant is None:
            return None
        running, pending = [], []
        with self._mirror:
            rows = sorted(self._queue_mirror(tenant).values(), key=lambda r: (r.number, r.id))
            for row in rows:
                (running if row.running else pending).append(self._encode(tenant, row.id, row.item))
        return f'{{"queue_running": [{", ".join(running)}], "queue_pending": [{", ".join(pending)}]}}'

    def encoded_history(self, max_items: int | None = None, offset: int = -1) -> str | None:
        """GET /history's body (get_history with the same paging) as JSON text, joined from each
        entry's cached text; None for unscoped callers."""
        tenant = context.current()
        if tenant is None:
            return None
        with self._mirror:
            items = list(self._history_mirror(tenant).items())
            if offset < 0 and max_items is not None:
                offset = len(items) - max_items
            offset = max(offset, 0)
            end = offset + max_items if max_items is not None and max_items >= 0 else None
            parts = [f"{json.dumps(pid)}: {self._encode(tenant, ('h', pid), entry)}"
                     for pid, entry in items[offset:end]]
        return "{" + ", ".join(parts) + "}"

    def _encode(self, tenant: str, key: Any, value: object) -> str:
        """The cached JSON text of `value` (a mirror's object under `key`); the caller holds self._mirror."""
        cache = self._encoded.setdefault(tenant, {})
        cached = cache.get(key)
        if cached is not None and cached[0] is value:
            return cached[1]
        if len(cache) > 2 * (len(self._queues.get(tenant, ())) + len(self._histories.get(tenant, ()))) + 64:
            live = {r.id: r.item for r in self._queues.get(tenant, {}).values()}
            live.update({("h", pid): e for pid, e in self._histories.get(tenant, {}).items()})
            for stale in [k for k, (v, _) in cache.items() if live.get(k) is not v]:
                del cache[stale]
        text = dumps_json(value)
        cache[key] = (value, text)
        return text

    def running_prompt_ids(self) -> list[str]:
        return [r.prompt_id for r in self.store.queue_rows(context.current(), running=True)]

    def get_tasks_remaining(self) -> int:
        return sum(self.store.queue_counts(context.current()))

    def wipe_queue(self) -> None:
        tenant = context.current()
        self.store.queue_clear(tenant)
        with self._mirror:
            for name, rows in self._queues.items():
                if tenant is None or name == tenant:
                    self._queues[name] = {i: r for i, r in rows.items() if r.running}
        self._on_change(tenant)

    def delete_queue_item(self, predicate: Callable[[QueueItem], bool]) -> bool:
        for row in self.store.queue_rows(context.current(), running=False):
            if predicate(QueueItem(*row.item)):
                self.store.queue_remove(row.id)
                with self._mirror:
                    self._queues.get(row.tenant, {}).pop(row.id, None)
                self._sensitive.pop(row.id, None)
                self._on_change(row.tenant)
                return True
        return False

    # -- history -------------------------------------------------------------------------
    def get_history(self, prompt_id: str | None = None, max_items: int | None = None, offset: int = -1) -> dict:
        """The calling tenant's history with ComfyUI's paging (store.history's); its entries are shared
        with the queue: do not change them."""
        tenant = context.current()
        if tenant is None:
            return self.store.history(None, prompt_id, max_items, offset)
        with self._mirror:
            history = self._history_mirror(tenant)
            if prompt_id is not None:
                return {prompt_id: history[prompt_id]} if prompt_id in history else {}
            items = list(history.items())
        if offset < 0 and max_items is not None:
            offset = len(items) - max_items
        offset = max(offset, 0)
        end = offset + max_items if max_items is not None and max_items >= 0 else None   # SQLite: LIMIT -1
        return dict(items[offset:end])

    def wipe_history(self) -> None:
        tenant = context.current()
        self.store.history_delete(tenant)
        with self._mirror:
            for name in list(self._histories):
                if tenant is None or name == tenant:
                    self._histories[name] = {}

    def delete_history_item(self, prompt_id: str) -> None:
        tenant = context.current()
        self.store.history_delete(tenant, prompt_id)
        with self._mirror:
            for name, history in self._histories.items():
                if tenant is None or name == tenant:
                    history.pop(prompt_id, None)

    # -- worker flags (/free) -----------------------------------------------------------
    def set_flag(self, name: str, value: Any) -> None:
        with self._cond:
            self._flags[name] = value
            self._cond.notify_all()

    def get_flags(self, reset: bool = True) -> dict:
        with self._cond:
            flags = dict(self._flags)
            if reset:
                self._flags.clear()
            return flags


def _count_images(outputs: dict) -> int:
    return sum(len(node.get("images") or []) for node in outputs.values()
               if isinstance(node, dict) and isinstance(node.get("images"), list))
