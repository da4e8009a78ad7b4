"""The queue worker: threads that take prompts off the queue and run them, as ComfyUI's prompt_worker.

Threads (not tasks on the HTTP loop) because node bodies run long synchronous torch code; each thread
owns its own event loop so the executor's async nodes still run concurrently within a prompt. With one
thread (the default, ComfyUI's behaviour) prompts run one at a time and share one output cache. With
`concurrent_prompts` > 1 (a cluster behind the server) each thread is an orchestrator with its own
engine and cache, talking to clients through a `PromptSink` that carries its prompt's client id; a
dispatcher thread hands each prompt to the lowest-numbered idle orchestrator, so prompts sent one after
another all run on the first and share its cache as in ComfyUI (its caching tests rely on it), and the
others take prompts only while it is busy.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import logging
import queue as queues
import threading
import time
from typing import TYPE_CHECKING, Any

from comfy_bridge.execution.node_context import executing_node_key
from nodes import output_claims, progress, text_limits

from .prompt_queue import ExecutionStatus, QueueItem

if TYPE_CHECKING:
    from .app import PromptServer

log = logging.getLogger(__name__)


class PromptSink:
    """What one orchestrator's engine sends through: the server, with the running prompt's own client
    id and last node, so concurrent prompts never mix their clients."""

    def __init__(self, server: PromptServer) -> None:
        self._server = server
        self.client_id: str | None = None
        self.last_node_id: str | None = None

    def send_sync(self, event: Any, data: Any, sid: str | None = None) -> None:
        self._server.send_sync(event, data, sid)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


class QueueWorker:
    def __init__(self, server: PromptServer, concurrency: int = 1):
        self.server = server
        self.concurrency = max(1, concurrency)
        self.executors: dict[int, Any] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._inboxes: list[queues.SimpleQueue] = []
        self._idle: set[int] = set()
        self._changed = threading.Condition()

    @property
    def executor(self) -> Any:
        """The first orchestrator's engine (the only one in ComfyUI's one-at-a-time mode)."""
        return self.executors.get(0)

    def start(self) -> None:
        self._stop.clear()
        self._inboxes = [queues.SimpleQueue() for _ in range(self.concurrency)]
        self._idle = set(range(self.concurrency))
        self._threads = [
            threading.Thread(target=self._run, args=(i,), name=f"prompt_worker-{i}", daemon=True)
            for i in range(self.concurrency)
        ]
        if self.concurrency > 1:
            self._threads.append(threading.Thread(target=self._dispatch, name="prompt_dispatch", daemon=True))
        for thread in self._threads:
            thread.start()

    def alive(self) -> bool:
        """Whether every worker thread is running (a health check's answer)."""
        return bool(self._threads) and all(t.is_alive() for t in self._threads)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self.server.prompt_queue.running_prompt_ids():
            progress.interrupt()  # let the running node notice
        for _ in self._threads:
            self.server.prompt_queue.wake()
        for thread in self._threads:
            thread.join(timeout)
        progress.interrupt(False)  # leave no interrupt pending for whoever runs next

    def _run(self, index: int) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        queue = self.server.prompt_queue
        # One at a time the server itself is the sink (ComfyUI's PromptServer.client_id stays meaningful).
        sink = self.server if self.concurrency == 1 else PromptSink(self.server)
        try:
            while not self._stop.is_set():
                if self.concurrency == 1:
                    got = queue.get(timeout=1.0)
                    if got is not None and not self._stop.is_set():
                        self._execute(loop, index, sink, *got)
                elif (handed := self._next(index)) is not None and not self._stop.is_set():
                    got, context = handed
                    context.run(self._execute, loop, index, sink, *got)
                self._apply_flags(queue.get_flags())
        finally:
            loop.close()

    def _next(self, index: int) -> tuple[tuple[QueueItem, int], contextvars.Context] | None:
        """Orchestrator `index`'s next prompt from the dispatcher, with the context the queue set while
        handing it out (a hosted server's tenant scope); None after a second without one."""
        try:
            return self._inboxes[index].get(timeout=1.0)
        except queues.Empty:
            return None

    def _dispatch(self) -> None:
        """Take a prompt off the queue only while an orchestrator is idle, and give it to the lowest-numbered
        idle one (prompts left in the queue stay pending, cancellable and visible as such)."""
        queue = self.server.prompt_queue
        while not self._stop.is_set():
            with self._changed:
                if not self._changed.wait_for(lambda: self._idle or self._stop.is_set(), timeout=1.0):
                    continue
            got = queue.get(timeout=1.0)
            if got is None:
                continue
            with self._changed:
                index = min(self._idle)
                self._idle.discard(index)
            # queue.get set the prompt's tenant in this thread's context: the orchestrator runs in a copy
            self._inboxes[index].put((got, contextvars.copy_context()))

    def _done(self, index: int) -> None:
        """Orchestrator `index` is idle again: before its prompt is reported done, so that a client sending
        the next prompt at once finds it idle (and its cache) rather than the next orchestrator."""
        if self.concurrency > 1:
            with self._changed:
                self._idle.add(index)
                self._changed.notify_all()

    def _execute(self, loop: asyncio.AbstractEventLoop, index: int, sink: Any, item: QueueItem, task_id: int) -> None:
        server = self.server
        started = time.perf_counter()
        server.last_prompt_id = item.prompt_id
        sink.client_id = item.extra_data.get("client_id")
        token = progress.bind_prompt(item.prompt_id)
        text_limit = text_limits.bind_max_text_chars(server.max_text_chars_for_run())
        claims = output_claims.bind(getattr(server.prompt_queue, "output_claims", None), task_id, executing_node_key)
        history_result: dict = {}
        status: ExecutionStatus
        executor = None
        try:
            executor = self.executors.get(index)
            if executor is None:
                executor = self.executors[index] = server.make_executor(sink)
            loop.run_until_complete(
                executor.execute_async(
                    item.prompt, item.prompt_id, {**item.extra_data, **(item.sensitive or {})}, item.outputs_to_execute
                )
            )
            history_result = executor.history_result
            status = ExecutionStatus(
                "success" if executor.success else "error", bool(executor.success), list(executor.status_messages)
            )
        except Exception as exc:  # the engine itself failed: record it, keep serving
            log.exception("prompt %s failed outside node execution", item.prompt_id)
            status = ExecutionStatus(
                "error",
                False,
                [
                    (
                        "execution_error",
                        {
                            "prompt_id": item.prompt_id,
                            "exception_message": str(exc),
                            "exception_type": type(exc).__name__,
                            "timestamp": int(time.time() * 1000),
                        },
                    )
                ],
            )
            if executor is not None:
                history_result = getattr(executor, "history_result", {}) or {}
        finally:
            output_claims.unbind(claims)
            progress.unbind_prompt(token)
            text_limits.unbind_max_text_chars(text_limit)
        self._done(index)
        server.prompt_queue.task_done(task_id, history_result, status)
        if sink.client_id is not None:
            server.send_sync("executing", {"node": None, "prompt_id": item.prompt_id}, sink.client_id)
        sink.last_node_id = None
        log.info("Prompt executed in %.2f seconds", time.perf_counter() - started)

    def _apply_flags(self, flags: dict) -> None:
        free_memory = flags.get("free_memory", False)
        for executor in list(self.executors.values()):
            if flags.get("unload_models", free_memory):
                unload = getattr(executor, "unload_models", None)
                if callable(unload):
                    unload()
            if free_memory:
                executor.reset()
        if flags:
            gc.collect()
