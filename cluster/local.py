"""The in-process runtime and the compute thread it shares with node bodies.

`LocalRuntime` runs ModelFns through the executor core (cluster.executor.core), the one execution
path: same memory budget, layer cache and batching as an executor process, tensors handed over directly."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from cluster.call import Params, typed
from cluster.executor.core import DirectIO, ExecutorCore, Fault, Part, Ran
from cluster.modelfn import get_model_fn
from cluster.refs import ModelRef
from cluster.runtime import Runtime
from cluster.scheduling.batching import batch_tag

# Every in-process ModelFn runs on this one thread. torch's OpenMP pool is per calling thread: calls
# spread over asyncio's default thread pool would start a team per thread, and the idle teams' spinning
# threads steal the cores from the working one (measured: a 64 px UNet step went from 11 ms to 35-54 ms).
COMPUTE_THREAD = "modelfn"
COMPUTE = ThreadPoolExecutor(max_workers=1, thread_name_prefix=COMPUTE_THREAD)


T = TypeVar("T")


def on_compute_thread() -> bool:
    return threading.current_thread().name.startswith(COMPUTE_THREAD)


def run_on_compute(main: Callable[[], Coroutine[Any, Any, T]], on_interrupt: Callable[[], None] | None = None) -> T:
    """`asyncio.run(main())` with the event loop on the ModelFn thread. In-process ModelFns and sync node
    bodies then run inline instead of being handed to this thread and back, two thread wake-ups per call
    (a 20-step KSampler makes 20 calls). For one-shot programs (`comfy-cluster run`) that need no loop
    of their own while a ModelFn runs. `on_interrupt` is called on Ctrl-C, before it propagates: the
    caller's way to stop the work still running on the compute thread (the back end knows no prompt)."""
    if on_compute_thread():
        return _run_here(main)
    future = COMPUTE.submit(_run_here, main)
    try:
        return future.result()
    except KeyboardInterrupt:  # Ctrl-C lands in the waiting thread, not in the work it waits for
        if on_interrupt is not None:
            on_interrupt()
        raise


_runner: asyncio.Runner | None = None  # the compute thread's event loop, used only on that thread


def _run_here(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """main() on this thread's long-lived loop. asyncio.run makes and closes a loop per call, and closing
    one starts a thread only to shut its default executor down: 1.5 ms per prompt, measured."""
    global _runner
    if _runner is None:
        _runner = asyncio.Runner()
    try:
        return _runner.run(main(), context=contextvars.copy_context())
    finally:  # what asyncio.run does at close: nothing a prompt left running outlives it
        loop = _runner.get_loop()
        leftovers = asyncio.all_tasks(loop)
        for task in leftovers:
            task.cancel()
        if leftovers:
            loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))


def set_threads(n: int) -> None:
    """torch's thread count for this thread and the ModelFn thread (OpenMP keeps one per thread)."""
    torch.set_num_threads(n)
    COMPUTE.submit(torch.set_num_threads, n).result()


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """torch's thread count on this thread set to `n` for the block (None: left as it is)."""
    before = torch.get_num_threads()
    if n is None or n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class SharedCompute(ThreadPoolExecutor):  # asyncio accepts only ThreadPoolExecutors as default executor
    """COMPUTE as an event loop's default executor: loops come and go (asyncio.run shuts its default
    executor down), the thread stays for the process. Its own pool is never used."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)

    def submit(self, fn, /, *args, **kwargs) -> Future:
        if not on_compute_thread():
            return COMPUTE.submit(fn, *args, **kwargs)
        done: Future = Future()  # the loop runs on COMPUTE itself (run_on_compute): queueing would deadlock
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - delivered to the awaiting coroutine, as a pool would
            done.set_exception(e)
        return done

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


class LocalRuntime(Runtime):
    """The in-process runtime (`--executors 0`): the executor core (cluster.executor.core) without the
    process boundary, as vLLM's in-process client wraps the same engine core. Its calls get an
    executor's memory budget, layer cache and batching; the tensors are handed in and out directly
    (`DirectIO`) instead of through the data plane's shared memory. Calls run on the compute thread.

    Batching (`max_batch` above 1, serve's --max-batch): calls from concurrent prompts queue for the
    compute thread; the oldest runs together with the queued calls of the same batch tag
    (cluster.scheduling.batching.batch_tag, the head's grouping) up to `max_batch` samples, as one merged core run,
    after waiting at most `batch_window_s` from its arrival for the batch to fill (the head's window)."""

    def __init__(self, core: ExecutorCore | None = None, max_batch: int = 1, batch_window_s: float = 0.02) -> None:
        self.core = core or ExecutorCore.in_process()
        self.max_batch, self.batch_window_s = max_batch, batch_window_s
        # torch's thread count while a ModelFn runs (serve sets it from --executor-threads with --executors 0), or None
        # for the compute thread's own. Only the ModelFns: node bodies keep the count they have in a server's
        # head, because some CPU kernels round by it (a float32 bilinear resize differs between one thread
        # and two on an AVX-512 CPU) and the two modes must give the same bits.
        self.threads: int | None = None
        self._io = DirectIO(torch.device(self.core.device))
        # torch already uses every core per op; one call at a time keeps results deterministic.
        self._lock = threading.Lock()
        self._arrived = threading.Condition()  # guards _queued; notified when a call queues
        self._queued: list[_Queued] = []  # calls waiting for the compute thread, oldest first
        self.batches_run = 0  # merged core runs (of two calls or more)
        self.parts_batched = 0  # calls that ran in them

    def run(
        self,
        fn_name: str,
        model: ModelRef | None,
        inputs: dict[str, torch.Tensor | None],
        params: Params | dict[str, Any] | None = None,
    ) -> dict[str, torch.Tensor]:
        """Synchronous call: one dispatch through the core, on the calling thread. The ModelFn's own
        exception is raised again (its type matters: an interrupt, a bad input)."""
        part = _part(model, inputs, typed(get_model_fn(fn_name).Params, params))
        with self._lock, torch_threads(self.threads):
            (result,) = self.core.run(fn_name, [part], self._io)
        return _outputs(result)

    async def call(
        self,
        fn: str,
        model: ModelRef | None,
        inputs: dict[str, torch.Tensor | None],
        params: Params | dict[str, Any] | None = None,
        *,
        spread: bool = False,  # one compute thread: nothing to spread over
    ) -> dict[str, torch.Tensor]:
        if on_compute_thread():
            return self.run(fn, model, inputs, params)  # already on it (run_on_compute, a pack's sync code)
        params = typed(get_model_fn(fn).Params, params)
        loop = asyncio.get_running_loop()
        ctx = contextvars.copy_context()
        tag, samples = (None, 1) if self.max_batch <= 1 or model is None else batch_tag(fn, model, inputs, params)
        if tag is None:
            return await loop.run_in_executor(COMPUTE, ctx.run, self.run, fn, model, inputs, params)
        queued = _Queued(fn, tag, samples, _part(model, inputs, params), Future(), time.monotonic())
        with self._arrived:
            self._queued.append(queued)
            self._arrived.notify_all()
        # One turn of the compute thread per call: a turn that finds its call taken by an earlier
        # turn's batch has nothing left to do.
        loop.run_in_executor(COMPUTE, ctx.run, self._run_queued)
        return _outputs(await asyncio.wrap_future(queued.done))

    def _take_batch(self) -> list[_Queued]:
        """The oldest queued call and those that can share its run, waiting for more while the batch is
        not full and the oldest has waited less than the window (the head's --batch-window-ms)."""
        with self._arrived:
            while True:
                if not self._queued:
                    return []
                first = self._queued[0]
                batch, samples = [], 0
                for q in self._queued:
                    if q.fn == first.fn and q.tag == first.tag and (not batch or samples + q.samples <= self.max_batch):
                        batch.append(q)
                        samples += q.samples
                wait = first.queued_at + self.batch_window_s - time.monotonic()
                if samples >= self.max_batch or wait <= 0:
                    self._queued = [q for q in self._queued if q not in batch]
                    return batch
                self._arrived.wait(wait)

    def _run_queued(self) -> None:
        batch = self._take_batch()
        if not batch:
            return
        if len(batch) > 1:
            self.batches_run += 1
            self.parts_batched += len(batch)
        try:
            with self._lock, torch_threads(self.threads):
                results = self.core.run(batch[0].fn, [q.part for q in batch], self._io)
        except BaseException as e:  # noqa: BLE001 - the core reports faults per part; this is its own failure
            for q in batch:
                q.done.set_exception(e)
            raise
        for q, result in zip(batch, results):
            q.done.set_result(result)

    def free(self, unload_models: bool = True) -> None:
        if unload_models:
            with self._lock:
                self.core.unload()

    def stats(self) -> dict[str, Any]:
        """The batching counters in /cluster/stats' shape (served in-process, there is no head)."""
        return {
            "batching": {"max_batch": self.max_batch},
            "batches_dispatched": self.batches_run,
            "parts_batched": self.parts_batched,
        }


@dataclass(eq=False)
class _Queued:
    fn: str
    tag: str
    samples: int
    part: Part
    done: Future
    queued_at: float


def _part(model: ModelRef | None, inputs: dict[str, torch.Tensor | None], params: Params) -> Part:
    return Part(
        model,
        params,
        {k: v for k, v in inputs.items() if v is not None},
        [k for k, v in inputs.items() if v is None],
    )


def _outputs(result: Ran | Fault) -> dict[str, torch.Tensor]:
    if isinstance(result, Fault):
        raise result.error
    return result.outputs


_default: LocalRuntime | None = None


def default_local_runtime(max_batch: int | None = None, batch_window_s: float | None = None) -> LocalRuntime:
    """The process's in-process runtime; serve's --max-batch and --batch-window-ms with --executors 0 set
    its batching."""
    global _default
    if _default is None:
        _default = LocalRuntime()
    if max_batch is not None:
        _default.max_batch = max_batch
    if batch_window_s is not None:
        _default.batch_window_s = batch_window_s
    return _default
