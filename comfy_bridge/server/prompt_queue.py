"""The prompt queue and the history of finished prompts (ComfyUI's PromptQueue semantics).

In memory for now; `PromptQueue` is the whole interface the routes and the worker use, so a
durable store (SQLite in the workspace) can replace it without touching them. Thread-safe: the
HTTP loop puts and inspects, the worker thread gets and completes.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

MAX_HISTORY = 10000
# Keys of extra_data that are secrets: kept for execution, never stored in /queue or /history.
SENSITIVE_EXTRA_DATA_KEYS = ("auth_token_comfy_org", "api_key_comfy_org")
# A queue number is a float that the web UI reads as a JavaScript number and the durable store keeps
# as a REAL, then counts on from as an int: beyond 2**53 it loses integer precision, at Infinity it
# breaks all three.
MAX_QUEUE_NUMBER = 2**53


def queue_number(value: Any) -> float | None:
    """A client's explicit `number` as ComfyUI reads it (float(value)); None when it is not a finite
    number within MAX_QUEUE_NUMBER."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int too large for a float
        return None
    return number if math.isfinite(number) and abs(number) <= MAX_QUEUE_NUMBER else None


class DuplicatePromptId(ValueError):
    """A prompt_id already in use: queued, or in the history of another tenant (a durable queue refuses
    it; ComfyUI's in-memory queue, like ComfyUI, does not)."""

    def __init__(self, prompt_id: str) -> None:
        super().__init__(
            f"prompt_id {prompt_id!r} is already in use (a queued prompt, or a finished one of "
            "another client, has it): omit prompt_id to let the server choose one"
        )
        self.prompt_id = prompt_id


class QueueItem(NamedTuple):
    number: float
    prompt_id: str
    prompt: dict
    extra_data: dict
    outputs_to_execute: list
    sensitive: dict | None = None  # secrets from extra_data, handed to the executor only

    def public(self) -> list:
        """The 5-element list ComfyUI shows in /queue and stores in history."""
        return [self.number, self.prompt_id, self.prompt, self.extra_data, self.outputs_to_execute]


@dataclass
class ExecutionStatus:
    status_str: str  # "success" | "error"
    completed: bool
    messages: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"status_str": self.status_str, "completed": self.completed, "messages": self.messages}


class PromptQueue:
    def __init__(self, on_change: Callable[[], None] = lambda: None, max_history: int = MAX_HISTORY):
        self._on_change = on_change
        self._max_history = max_history
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._heap: list[tuple[float, int, QueueItem]] = []
        self._seq = itertools.count()  # tie-break equal numbers by arrival, never compare prompts
        self._running: dict[int, QueueItem] = {}
        self._task_ids = itertools.count()
        self._history: dict[str, dict] = {}
        self._flags: dict[str, Any] = {}

    # -- queue ---------------------------------------------------------------------------
    def put(self, item: QueueItem | tuple) -> None:
        """Enqueue; plain 5- or 6-tuples (as node packs build them for ComfyUI) are accepted too."""
        item = item if isinstance(item, QueueItem) else QueueItem(*item)
        with self._cond:
            heapq.heappush(self._heap, (item.number, next(self._seq), item))
            # the "status" of this enqueue goes out before a worker can take the item and announce
            # execution_start (ComfyUI's order; the lock is re-entrant for the count it reads)
            self._on_change()
            self._cond.notify()

    def get(self, timeout: float | None = None) -> tuple[QueueItem, int] | None:
        """Pop the lowest-numbered item and mark it running; None on timeout or wake-up."""
        with self._cond:
            if not self._heap:
                self._cond.wait(timeout)
                if not self._heap:
                    return None
            _, _, item = heapq.heappop(self._heap)
            task_id = next(self._task_ids)
            self._running[task_id] = copy.deepcopy(item)
        self._on_change()
        return item, task_id

    def wake(self) -> None:
        """Make a waiting `get` return (flags set, or shutting down)."""
        with self._cond:
            self._cond.notify_all()

    def task_done(self, task_id: int, history_result: dict, status: ExecutionStatus | None) -> None:
        with self._cond:
            item = self._running.pop(task_id)
            if item.prompt_id not in self._history and len(self._history) >= self._max_history:
                self._history.pop(next(iter(self._history)))
            result = history_result or {}
            self._history[item.prompt_id] = {
                "prompt": item.public(),
                "outputs": copy.deepcopy(result.get("outputs", {})),
                "status": status.as_dict() if status is not None else None,
                "meta": copy.deepcopy(result.get("meta", {})),
            }
        self._on_change()

    def get_current_queue(self) -> tuple[list[list], list[list]]:
        """(running, pending) as ComfyUI's 5-element lists; pending in heap order, like ComfyUI."""
        with self._lock:
            running = [copy.deepcopy(i.public()) for i in self._running.values()]
            pending = [copy.deepcopy(e[2].public()) for e in self._heap]
        return running, pending

    def running_prompt_ids(self) -> list[str]:
        with self._lock:
            return [i.prompt_id for i in self._running.values()]

    def get_tasks_remaining(self) -> int:
        with self._lock:
            return len(self._heap) + len(self._running)

    def wipe_queue(self) -> None:
        with self._lock:
            self._heap.clear()
        self._on_change()

    def delete_queue_item(self, predicate: Callable[[QueueItem], bool]) -> bool:
        """Remove the first pending item matching `predicate`; True when one was removed."""
        with self._lock:
            for i, entry in enumerate(self._heap):
                if predicate(entry[2]):
                    self._heap.pop(i)
                    heapq.heapify(self._heap)
                    break
            else:
                return False
        self._on_change()
        return True

    # -- history -------------------------------------------------------------------------
    def get_history(self, prompt_id: str | None = None, max_items: int | None = None, offset: int = -1) -> dict:
        """ComfyUI's paging: offset < 0 with max_items means the newest max_items entries."""
        with self._lock:
            if prompt_id is not None:
                entry = self._history.get(prompt_id)
                return {prompt_id: copy.deepcopy(entry)} if entry is not None else {}
            if offset < 0 and max_items is not None:
                offset = len(self._history) - max_items
            out = {}
            for index, (key, entry) in enumerate(self._history.items()):
                if index < offset:
                    continue
                if max_items is not None and len(out) >= max_items:
                    break
                out[key] = copy.deepcopy(entry)
            return out

    def wipe_history(self) -> None:
        with self._lock:
            self._history.clear()

    def delete_history_item(self, prompt_id: str) -> None:
        with self._lock:
            self._history.pop(prompt_id, None)

    # -- worker flags (/free) -----------------------------------------------------------
    def set_flag(self, name: str, value: Any) -> None:
        with self._cond:
            self._flags[name] = value
            self._cond.notify_all()

    def get_flags(self, reset: bool = True) -> dict:
        with self._lock:
            flags = dict(self._flags)
            if reset:
                self._flags.clear()
            return flags
