"""`QueueViews`: the in-memory copies of the queue rows and history that GET /queue and GET /history
read, per scope (a tenant's name, or None: every tenant's rows, what unscoped readers such as the
single-user server see), and the bodies those routes answer with.

Every client re-reads /queue and /history on each status message, and some poll them in a loop.
Reading them from SQLite and encoding them anew for each request took the CPU the prompts needed (6
clients polling 1,000 queued prompts: 13 of them finished in 60 s), and behind the worker's store lock
it was the tail of those routes. So a scope's rows and entries are loaded once, then updated after each
store write; each entry's JSON text is computed once; and each body is built once per change of its
scope and then served as it is, bytes, to every read until the next change (`builds` counts the bodies
built). Updates are idempotent, so one made after a load that already saw its write changes nothing.
One lock guards it all, never held across the worker's store writes.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from typing import Any

from comfy_bridge.server.common import dumps_json

from .store import QueueRow, Store

Scope = str | None  # a tenant, or None for all of them
MAX_BODIES = 8  # /history bodies kept per scope (one per paging a client asked for)


class QueueViews:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._queues: dict[Scope, dict[int, QueueRow]] = {}
        self._histories: dict[Scope, dict[str, dict]] = {}
        # key -> (the object it encodes, its JSON text), valid while a view still holds that very object
        self._texts: dict[Scope, dict[Any, tuple[object, str]]] = {}
        self._bodies: dict[Scope, dict[Any, bytes]] = {}  # dropped on each change of the scope
        self.builds = 0

    # -- loading ---------------------------------------------------------------------------------
    def loaded(self, scope: Scope) -> bool:
        return scope in self._queues and scope in self._histories

    def load(self, scope: Scope) -> None:
        """Load the scope's rows and history (a SQLite read and the JSON decoding of every row: callers
        on the event loop run it in a thread first)."""
        if not self.loaded(scope):
            with self._lock:
                self._queue(scope)
                self._history(scope)

    def _queue(self, scope: Scope) -> dict[int, QueueRow]:
        rows = self._queues.get(scope)
        if rows is None:
            rows = self._queues[scope] = {r.id: r for r in self.store.queue_rows(scope)}
        return rows

    def _history(self, scope: Scope) -> dict[str, dict]:
        history = self._histories.get(scope)
        if history is None:
            history = self._histories[scope] = self.store.history(scope)
        return history

    # -- updates, after the store's write (a row of tenant t is in the views of t and of None) ---------
    def _changed(self, tenant: str | None) -> list[Scope]:
        """The scopes a change of `tenant`'s rows (None: anyone's) touches, their bodies dropped."""
        if tenant is None:
            self._bodies.clear()
            return list({*self._queues, *self._histories})
        for scope in (tenant, None):
            self._bodies.pop(scope, None)
        return [tenant, None]

    def row_added(self, row: QueueRow) -> None:
        with self._lock:
            for scope in self._changed(row.tenant):
                if scope in self._queues:
                    self._queues[scope][row.id] = row

    def row_running(self, row: QueueRow) -> None:
        with self._lock:
            for scope in self._changed(row.tenant):
                rows = self._queues.get(scope)
                if rows is not None and row.id in rows:
                    rows[row.id] = replace(rows[row.id], running=True)

    def row_removed(self, row: QueueRow) -> None:
        with self._lock:
            for scope in self._changed(row.tenant):
                self._queues.get(scope, {}).pop(row.id, None)

    def finished(self, row: QueueRow, entry: dict, trimmed: list[str]) -> None:
        """Row `row` left the queue for history as `entry` (the newest, last); `trimmed`: the tenant's
        oldest entries the store dropped to make room."""
        with self._lock:
            for scope in self._changed(row.tenant):
                self._queues.get(scope, {}).pop(row.id, None)
                history = self._histories.get(scope)
                if history is not None:
                    history.pop(row.prompt_id, None)
                    history[row.prompt_id] = entry
                    for prompt_id in trimmed:
                        history.pop(prompt_id, None)

    def queue_cleared(self, tenant: str | None) -> None:
        """The pending rows of `tenant` (None: of everyone) were deleted."""
        with self._lock:
            for scope in self._changed(tenant):
                if scope in self._queues:
                    self._queues[scope] = {
                        i: r
                        for i, r in self._queues[scope].items()
                        if r.running or (tenant is not None and r.tenant != tenant)
                    }

    def history_removed(self, tenant: str | None, prompt_id: str | None = None) -> None:
        """`tenant`'s entry `prompt_id` (None: all its entries; tenant None: everyone's) was deleted."""
        with self._lock:
            for scope in self._changed(tenant):
                history = self._histories.get(scope)
                if history is None:
                    continue
                if tenant is not None and scope is None:
                    del self._histories[scope]  # which entries were the tenant's is not known here: reloaded
                elif prompt_id is None:
                    history.clear()
                else:
                    history.pop(prompt_id, None)

    # -- reads ----------------------------------------------------------------------------------
    def rows(self, scope: Scope) -> list[QueueRow]:
        """The scope's rows in queue order (number, then arrival), as store.queue_rows gives them."""
        with self._lock:
            return sorted(self._queue(scope).values(), key=lambda r: (r.number, r.id))

    def history(
        self, scope: Scope, prompt_id: str | None = None, max_items: int | None = None, offset: int = -1
    ) -> dict[str, dict]:
        """store.history's answer (ComfyUI's paging); its entries are shared: do not change them."""
        with self._lock:
            history = self._history(scope)
            if prompt_id is not None:
                return {prompt_id: history[prompt_id]} if prompt_id in history else {}
            return dict(_page(list(history.items()), max_items, offset))

    def queue_body(self, scope: Scope) -> bytes:
        """GET /queue's body: {"queue_running": [...], "queue_pending": [...]} as JSON."""
        with self._lock:
            bodies = self._bodies.setdefault(scope, {})
            body = bodies.get("queue")
            if body is None:
                running, pending = [], []
                for row in sorted(self._queue(scope).values(), key=lambda r: (r.number, r.id)):
                    (running if row.running else pending).append(self._text(scope, row.id, row.item))
                body = bodies["queue"] = (
                    f'{{"queue_running": [{", ".join(running)}], "queue_pending": [{", ".join(pending)}]}}'
                ).encode()
                self.builds += 1
            return body

    def history_body(self, scope: Scope, max_items: int | None = None, offset: int = -1) -> bytes:
        """GET /history's body (history() with the same paging) as JSON."""
        key = ("history", max_items, offset)
        with self._lock:
            bodies = self._bodies.setdefault(scope, {})
            body = bodies.get(key)
            if body is None:
                parts = [
                    f"{json.dumps(pid)}: {self._text(scope, ('h', pid), entry)}"
                    for pid, entry in _page(list(self._history(scope).items()), max_items, offset)
                ]
                if len(bodies) >= MAX_BODIES:  # many pagings of one unchanged history: keep the latest
                    del bodies[next(iter(bodies))]
                body = bodies[key] = ("{" + ", ".join(parts) + "}").encode()
                self.builds += 1
            return body

    def _text(self, scope: Scope, key: Any, value: object) -> str:
        """The cached JSON text of `value` (a view's object under `key`); the caller holds the lock."""
        cache = self._texts.setdefault(scope, {})
        cached = cache.get(key)
        if cached is not None and cached[0] is value:
            return cached[1]
        if len(cache) > 2 * (len(self._queues.get(scope, ())) + len(self._histories.get(scope, ()))) + 64:
            live = {r.id: r.item for r in self._queues.get(scope, {}).values()}
            live.update({("h", pid): e for pid, e in self._histories.get(scope, {}).items()})
            for stale in [k for k, (v, _) in cache.items() if live.get(k) is not v]:
                del cache[stale]
        text = dumps_json(value)
        cache[key] = (value, text)
        return text


def _page(items: list, max_items: int | None, offset: int) -> list:
    """ComfyUI's history paging (store.history's): offset < 0 with max_items means the newest max_items."""
    if offset < 0 and max_items is not None:
        offset = len(items) - max_items
    offset = max(offset, 0)
    end = offset + max_items if max_items is not None and max_items >= 0 else None  # SQLite: LIMIT -1
    return items[offset:end]
