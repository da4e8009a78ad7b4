"""`TenantQueue`: the server's PromptQueue interface over the durable `Store`, scoped per tenant.

Route-facing methods (put, get_current_queue, history, delete, ...) act for the tenant of the
calling context (tenancy.context): a tenant sees and changes only its own entries; unscoped
(single-user) code sees all. Worker-facing methods (get, task_done, flags) are global: `get`
picks the next prompt fairly between tenants (least weighted service first, then the prompt's
number), skips tenants at their concurrency limit, and binds the worker thread to the tenant of
the prompt it hands out, so the engine, its files and its messages act for that tenant.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from comfy_bridge.server.prompt_queue import MAX_HISTORY, ExecutionStatus, QueueItem

from . import tenant_context as context
from .queue_views import QueueViews
from .store import QueueRow, Store


class TenantQueue:
    def __init__(
        self,
        store: Store,
        on_change: Callable[[str | None], None] = lambda tenant: None,
        max_history: int = MAX_HISTORY,
    ):
        """`on_change(tenant)`: the queue of `tenant` changed ("" the single-user rows; None every
        tenant's, as when unscoped code clears the whole queue), for its `status` message."""
        self.store = store
        self.output_claims = store  # a prompt re-run after a restart writes the files its dead run named
        self._on_change = on_change
        self._max_history = max_history
        self._cond = threading.Condition(threading.RLock())
        self._flags: dict[str, Any] = {}
        self._sensitive: dict[int, dict] = {}  # secrets stay in memory, never on disk
        self._running: dict[int, tuple[QueueRow, float]] = {}
        self._served: dict[str, float] = {}  # tenant -> seconds of service / weight (this process)
        self.views = QueueViews(store)  # what the routes read: kept in step after each store write
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
            self.views.row_added(QueueRow(row_id, tenant or "", item.prompt_id, item.number, item.public(), False))
            # the "status" of this enqueue goes out before a worker can take the item and announce
            # execution_start (ComfyUI's order; the lock is re-entrant)
            self._on_change(tenant)
            self._cond.notify()
        if tenant is not None:
            self.load(tenant)  # (routes run put off the event loop) so that the tenant's next reads find them

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
            self.views.row_running(row)
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
            entry = {
                "prompt": row.item,
                "outputs": outputs,
                "status": status.as_dict() if status is not None else None,
                "meta": result.get("meta", {}),
            }
            trimmed = self.store.finish(row.id, row.prompt_id, row.tenant, entry, self._max_history)
            self.views.finished(row, entry, trimmed)
            self.store.add_usage(row.tenant, seconds, _count_images(outputs))
            self._cond.notify_all()  # a concurrency slot is free
        self._on_change(row.tenant)

    def get_current_queue(self) -> tuple[list[list], list[list]]:
        """(running, pending) items of the calling tenant; shared with the queue: do not change them."""
        rows = self.views.rows(context.current())
        return [r.item for r in rows if r.running], [r.item for r in rows if not r.running]

    def loaded(self, tenant: str | None) -> bool:
        """Whether the views of `tenant` (None: every tenant's) are loaded (its reads touch no SQLite)."""
        return self.views.loaded(tenant)

    def load(self, tenant: str | None) -> None:
        """Load the views of `tenant` if they are not yet: a SQLite read and JSON decoding of every row,
        so callers on the event loop run it in a thread first (the hosted server's middleware does, for
        each request of a tenant not loaded yet): 20 tenants' first reads at once stalled the loop for
        200 ms."""
        self.views.load(tenant)

    def encoded_queue(self) -> bytes:
        """GET /queue's body for the calling tenant (what json_response would write for
        get_current_queue), built once per change of its queue."""
        return self.views.queue_body(context.current())

    def encoded_history(self, max_items: int | None = None, offset: int = -1) -> bytes:
        """GET /history's body (get_history with the same paging), built once per change."""
        return self.views.history_body(context.current(), max_items, offset)

    def running_prompt_ids(self) -> list[str]:
        return [r.prompt_id for r in self.store.queue_rows(context.current(), running=True)]

    def get_tasks_remaining(self) -> int:
        return sum(self.store.queue_counts(context.current()))

    def wipe_queue(self) -> None:
        tenant = context.current()
        self.store.queue_clear(tenant)
        self.views.queue_cleared(tenant)
        self._on_change(tenant)

    def delete_queue_item(self, predicate: Callable[[QueueItem], bool]) -> bool:
        for row in self.store.queue_rows(context.current(), running=False):
            if predicate(QueueItem(*row.item)):
                self.store.queue_remove(row.id)
                self.views.row_removed(row)
                self._sensitive.pop(row.id, None)
                self._on_change(row.tenant)
                return True
        return False

    # -- history -------------------------------------------------------------------------
    def get_history(self, prompt_id: str | None = None, max_items: int | None = None, offset: int = -1) -> dict:
        """The calling tenant's history with ComfyUI's paging (store.history's); its entries are shared
        with the queue: do not change them."""
        return self.views.history(context.current(), prompt_id, max_items, offset)

    def wipe_history(self) -> None:
        tenant = context.current()
        self.store.history_delete(tenant)
        self.views.history_removed(tenant)

    def delete_history_item(self, prompt_id: str) -> None:
        tenant = context.current()
        self.store.history_delete(tenant, prompt_id)
        self.views.history_removed(tenant, prompt_id)

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
    return sum(
        len(node.get("images") or [])
        for node in outputs.values()
        if isinstance(node, dict) and isinstance(node.get("images"), list)
    )
