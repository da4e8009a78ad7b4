"""The queue worker: one thread that executes prompts one at a time, as ComfyUI's prompt_worker.

A thread (not a task on the HTTP loop) because node bodies run long synchronous torch code; the
thread owns its own event loop so the executor's async nodes still run concurrently within a prompt.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from comfy_bridge import progress

from .prompt_queue import ExecutionStatus, QueueItem

if TYPE_CHECKING:
    from .app import PromptServer

log = logging.getLogger(__name__)


class QueueWorker:
    def __init__(self, server: "PromptServer"):
        self.server = server
        self.executor: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="prompt_worker", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self.server.prompt_queue.running_prompt_ids():
            progress.interrupt()  # let the running node notice
        self.server.prompt_queue.wake()
        if self._thread is not None:
            self._thread.join(timeout)
        progress.interrupt(False)  # the flag is process-wide: leave it clear for whoever runs next

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        queue = self.server.prompt_queue
        try:
            while not self._stop.is_set():
                got = queue.get(timeout=1.0)
                if got is not None and not self._stop.is_set():
                    self._execute(loop, *got)
                self._apply_flags(queue.get_flags())
        finally:
            loop.close()

    def _execute(self, loop: asyncio.AbstractEventLoop, item: QueueItem, task_id: int) -> None:
        server = self.server
        started = time.perf_counter()
        server.last_prompt_id = item.prompt_id
        server.client_id = item.extra_data.get("client_id")
        progress.interrupt(False)  # a stale interrupt must not hit the next prompt
        history_result: dict = {}
        status: ExecutionStatus
        try:
            if self.executor is None:
                self.executor = server.make_executor()
            executor = self.executor
            loop.run_until_complete(executor.execute_async(
                item.prompt, item.prompt_id, {**item.extra_data, **(item.sensitive or {})}, item.outputs_to_execute))
            history_result = executor.history_result
            status = ExecutionStatus("success" if executor.success else "error", bool(executor.success),
                                     list(executor.status_messages))
        except Exception as exc:  # the engine itself failed: record it, keep serving
            log.exception("prompt %s failed outside node execution", item.prompt_id)
            status = ExecutionStatus("error", False, [("execution_error", {
                "prompt_id": item.prompt_id, "exception_message": str(exc),
                "exception_type": type(exc).__name__, "timestamp": int(time.time() * 1000)})])
            if self.executor is not None:
                history_result = getattr(self.executor, "history_result", {}) or {}
        server.prompt_queue.task_done(task_id, history_result, status)
        if server.client_id is not None:
            server.send_sync("executing", {"node": None, "prompt_id": item.prompt_id}, server.client_id)
        server.last_node_id = None
        log.info("Prompt executed in %.2f seconds", time.perf_counter() - started)

    def _apply_flags(self, flags: dict) -> None:
        free_memory = flags.get("free_memory", False)
        if flags.get("unload_models", free_memory) and self.executor is not None:
            unload = getattr(self.executor, "unload_models", None)
            if callable(unload):
                unload()
        if free_memory and self.executor is not None:
            self.executor.reset()
        if flags:
            gc.collect()
