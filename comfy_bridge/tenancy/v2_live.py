"""Live state of running Comfy API v2 jobs, fed by our own engine's messages, and the subscribers of
each job's event stream (GET /api/v2/jobs/{id}/events).

The engine reports a v2 job's execution to the client id `v2-<job id>`, which no websocket holds;
the server hands every message it sends to `Live.observe`, which keeps a progress snapshot per job
(node count and sampler step weighted) and pushes events to the job's subscribers. Nothing here is
durable: the store and the queue are the truth, this only makes the stream live."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

CLIENT_PREFIX = "v2-"


def client_id(job_id: str) -> str:
    return CLIENT_PREFIX + job_id


def job_of(sid: Any) -> str | None:
    """The v2 job a message addressed to `sid` belongs to, None for any other client."""
    return sid[len(CLIENT_PREFIX) :] if isinstance(sid, str) and sid.startswith(CLIENT_PREFIX) else None


@dataclass
class JobProgress:
    tenant: str  # whose job ("" the single user's)
    classes: dict[str, str]  # node id -> class_type, of the executed graph
    done: set[str] = field(default_factory=set)
    current: str | None = None
    step: int | None = None
    steps: int | None = None
    preview: tuple | None = None  # (node id, the engine's preview tuple)
    # Each change bumps `seq` under `lock`, so a stream that starts with a snapshot can drop the
    # published changes that snapshot already holds (they may still wait in its queue).
    seq: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def node_started(self, node: str) -> None:
        if self.current is not None and self.current != node:
            self.done.add(self.current)
        self.current, self.step, self.steps = node, None, None

    def node_finished(self, node: str) -> None:
        self.done.add(node)
        if self.current == node:
            self.current, self.step, self.steps = None, None, None

    def advance(self) -> tuple[int, dict]:
        """Count one change (call under `lock`): its sequence number and the snapshot after it."""
        self.seq += 1
        return self.seq, self.snapshot()

    def latest(self) -> tuple[int, dict]:
        """The newest change's sequence number and snapshot, consistent with each other."""
        with self.lock:
            return self.seq, self.snapshot()

    def snapshot(self) -> dict:
        """The contract's Progress: nodes done plus the current node's step fraction, over all nodes."""
        total = max(len(self.classes), 1)
        done = len(self.done - {self.current})
        part = self.step / self.steps if self.step is not None and self.steps else 0.0
        value = min(max((done + min(part, 1.0)) / total, 0.0), 1.0)
        cls = self.classes.get(self.current) if self.current else None
        message = None
        if cls is not None:
            message = f"{cls} {self.step}/{self.steps}" if self.steps else cls
        return {
            "value": round(value, 4),
            "nodes_done": done,
            "nodes_total": len(self.classes),
            "current_node": self.current,
            "current_node_class": cls,
            "step": self.step,
            "steps": self.steps,
            "message": message,
        }


class Hub:
    """Per-job progress and event subscribers. `publish` is safe from any thread; subscribers live
    on the server's event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._progress: dict[str, JobProgress] = {}
        self._subscribers: dict[str, set[asyncio.Queue]] = {}
        self.loop: asyncio.AbstractEventLoop | None = None

    def track(self, job_id: str, tenant: str, workflow: dict) -> JobProgress:
        classes = {str(k): str(v.get("class_type", "")) for k, v in workflow.items() if isinstance(v, dict)}
        with self._lock:
            return self._progress.setdefault(job_id, JobProgress(tenant, classes))

    def progress(self, job_id: str) -> JobProgress | None:
        with self._lock:
            return self._progress.get(job_id)

    def forget(self, job_id: str) -> None:
        with self._lock:
            self._progress.pop(job_id, None)

    def subscribe(self, job_id: str) -> asyncio.Queue:
        queue: asyncio.Queue = asyncio.Queue()
        self._subscribers.setdefault(job_id, set()).add(queue)
        return queue

    def unsubscribe(self, job_id: str, queue: asyncio.Queue) -> None:
        subscribers = self._subscribers.get(job_id)
        if subscribers is not None:
            subscribers.discard(queue)
            if not subscribers:
                del self._subscribers[job_id]

    def publish(self, job_id: str, event: str, payload: Any) -> None:
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._deliver, job_id, event, payload)
        except RuntimeError:  # the loop closed between the check and the call (shutdown)
            pass

    def nudge(self) -> None:
        """Tell every stream the queue changed (any thread): a queued job's position may have moved."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._nudge_all)
        except RuntimeError:
            pass

    def _nudge_all(self) -> None:
        for queues in list(self._subscribers.values()):
            for queue in list(queues):
                queue.put_nowait(("queue", None))

    def _deliver(self, job_id: str, event: str, payload: Any) -> None:
        for queue in list(self._subscribers.get(job_id, ())):
            queue.put_nowait((event, payload))
