"""With several orchestrators (--concurrent-prompts N, the default on a multi-executor machine) a prompt goes
to the lowest-numbered idle one: prompts sent one after another all run on the first and share its cache as
in ComfyUI (whose caching tests send a prompt, wait, send it again), and prompts sent together still run at
once on several. Checked on the queue worker with a stand-in server and engines."""

from __future__ import annotations

import contextvars
import queue
import threading
import time

from comfy_bridge.server.prompt_queue import QueueItem
from comfy_bridge.server.worker import QueueWorker

TENANT: contextvars.ContextVar[str | None] = contextvars.ContextVar("tenant", default=None)


class FakeQueue:
    def __init__(self) -> None:
        self.items: queue.Queue = queue.Queue()
        self.done: queue.Queue = queue.Queue()
        self.output_claims = None

    def get(self, timeout: float | None = None):
        try:
            got = self.items.get(timeout=timeout)
        except queue.Empty:
            return None
        TENANT.set(f"tenant-of-{got[0].prompt_id}")  # as the tenant queue scopes the thread that takes a prompt
        return got

    def put(self, n: int) -> None:
        self.items.put((QueueItem(n, f"p{n}", {}, {}, []), n))

    def task_done(self, task_id, history_result, status) -> None:
        self.done.put(task_id)

    def get_flags(self) -> dict:
        return {}

    def wake(self) -> None:
        pass

    def running_prompt_ids(self) -> list:
        return []


class FakeEngine:
    """Records, per prompt, which engine ran it and when."""

    def __init__(self, name: int, ran: dict, hold_s: float) -> None:
        self.name, self.ran, self.hold_s = name, ran, hold_s
        self.history_result: dict = {}
        self.success = True
        self.status_messages: list = []

    async def execute_async(self, prompt, prompt_id, extra, outputs) -> None:
        start = time.monotonic()
        time.sleep(self.hold_s)
        self.ran[prompt_id] = (self.name, start, time.monotonic(), TENANT.get())


class FakeServer:
    def __init__(self, hold_s: float) -> None:
        self.prompt_queue = FakeQueue()
        self.ran: dict = {}
        self.engines = 0
        self.hold_s = hold_s
        self.last_prompt_id = None

    def make_executor(self, sink) -> FakeEngine:
        self.engines += 1
        return FakeEngine(self.engines - 1, self.ran, self.hold_s)

    def send_sync(self, *args) -> None:
        pass

    def max_text_chars_for_run(self):
        return None


def _worker(hold_s: float, n: int = 3) -> tuple[QueueWorker, FakeServer]:
    server = FakeServer(hold_s)
    worker = QueueWorker(server, n)
    worker.start()
    return worker, server


def test_prompts_sent_one_after_another_all_run_on_the_first_orchestrator():
    worker, server = _worker(0.01)
    try:
        for n in range(8):
            server.prompt_queue.put(n)
            assert server.prompt_queue.done.get(timeout=10) == n  # the client waits for each, then sends again
        assert {server.ran[f"p{n}"][0] for n in range(8)} == {0}
    finally:
        worker.stop()


def test_prompts_sent_together_run_at_once_on_several_orchestrators():
    worker, server = _worker(0.5)
    try:
        for n in range(3):
            server.prompt_queue.put(n)
        assert sorted(server.prompt_queue.done.get(timeout=10) for _ in range(3)) == [0, 1, 2]
        runs = [server.ran[f"p{n}"] for n in range(3)]
        assert {engine for engine, _, _, _ in runs} == {0, 1, 2}
        assert max(start for _, start, _, _ in runs) < min(end for _, _, end, _ in runs)  # they overlapped
    finally:
        worker.stop()


def test_a_prompt_waits_in_the_queue_while_every_orchestrator_is_busy():
    worker, server = _worker(0.4, n=2)
    try:
        for n in range(3):
            server.prompt_queue.put(n)
        time.sleep(0.2)
        # two run, the third is still pending in the queue (cancellable there), not taken ahead of time
        assert server.prompt_queue.items.qsize() == 1
        assert sorted(server.prompt_queue.done.get(timeout=10) for _ in range(3)) == [0, 1, 2]
    finally:
        worker.stop()


def test_each_prompt_runs_in_the_tenant_scope_the_queue_set_when_it_was_taken():
    """The queue sets the prompt's tenant in the thread that takes it (the dispatcher): the orchestrator that
    runs it must see that tenant, or its websocket events go to no tenant's client."""
    worker, server = _worker(0.2)
    try:
        for n in range(3):
            server.prompt_queue.put(n)
        assert sorted(server.prompt_queue.done.get(timeout=10) for _ in range(3)) == [0, 1, 2]
        assert [server.ran[f"p{n}"][3] for n in range(3)] == [f"tenant-of-p{n}" for n in range(3)]
    finally:
        worker.stop()


def test_stop_ends_every_thread():
    worker, _ = _worker(0.01)
    worker.stop(timeout=5)
    assert not any(t.is_alive() for t in threading.enumerate() if t.name.startswith("prompt_"))
