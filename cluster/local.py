"""The in-process runtime and the compute thread it shares with node bodies.

`LocalRuntime` runs ModelFns through the executor core (cluster.executor_core), the one execution
path: same memory budget, layer cache and batching as an executor process, tensors handed over directly."""
from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import torch

from cluster.executor_core import DirectIO, ExecutorCore, Fault, Part
from cluster.refs import ModelRef
from cluster.runtime import Runtime


# Every in-process ModelFn runs on this one thread. torch's OpenMP pool is per calling thread: calls
# spread over asyncio's default thread pool would start a team per thread, and the idle teams' spinning
# threads steal the cores from the working one (measured: a 64 px UNet step went from 11 ms to 35-54 ms).
COMPUTE_THREAD = "modelfn"
COMPUTE = ThreadPoolExecutor(max_workers=1, thread_name_prefix=COMPUTE_THREAD)


T = TypeVar("T")


def on_compute_thread() -> bool:
    return threading.current_thread().name.startswith(COMPUTE_THREAD)


def run_on_compute(main: Callable[[], Coroutine[Any, Any, T]],
                   on_interrupt: Callable[[], None] | None = None) -> T:
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
    except KeyboardInterrupt:   # Ctrl-C lands in the waiting thread, not in the work it waits for
        if on_interrupt is not None:
            on_interrupt()
        raise


_runner: asyncio.Runner | None = None   # the compute thread's event loop, used only on that thread


def _run_here(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """main() on this thread's long-lived loop. asyncio.run makes and closes a loop per call, and closing
    one starts a thread only to shut its default executor down: 1.5 ms per prompt, measured."""
    global _runner
    if _runner is None:
        _runner = asyncio.Runner()
    try:
        return _runner.run(main(), context=contextvars.copy_context())
    finally:   # what asyncio.run does at close: nothing a prompt left running outlives it
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


class SharedCompute(ThreadPoolExecutor):  # asyncio accepts only ThreadPoolExecutors as default executor
    """COMPUTE as an event loop's default executor: loops come and go (asyncio.run shuts its default
    executor down), the thread stays for the process. Its own pool is never used."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)

    def submit(self, fn, /, *args, **kwargs) -> Future:
        if not on_compute_thread():
            return COMPUTE.submit(fn, *args, **kwargs)
        done: Future = Future()   # the loop runs on COMPUTE itself (run_on_compute): queueing would deadlock
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - delivered to the awaiting coroutine, as a pool would
            done.set_exception(e)
        return done

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


class LocalRuntime(Runtime):
    """The in-process runtime (`--executors 0`): the executor core (cluster.executor_core) without the
    process boundary, as vLLM's in-process client wraps the same engine core. Its calls get an
    executor's memory budget, layer cache and batching; the tensors are handed in and out directly
    (`DirectIO`) instead of through the data plane's shared memory. Calls run on the compute thread."""

    def __init__(self, core: ExecutorCore | None = None) -> None:
        self.core = core or ExecutorCore.in_process()
        self._io = DirectIO(torch.device(self.core.device))
        # torch already uses every core per op; one call at a time keeps results deterministic.
        self._lock = threading.Lock()

    def run(self, fn_name: str, model: ModelRef | None, inputs: dict[str, torch.Tensor | None],
            params: dict[str, Any] | None = None) -> dict[str, torch.Tensor]:
        """Synchronous call: one dispatch through the core, on the calling thread. The ModelFn's own
        exception is raised again (its type matters: an interrupt, a bad input)."""
        part = Part(model, params or {}, {k: v for k, v in inputs.items() if v is not None},
                    [k for k, v in inputs.items() if v is None])
        with self._lock:
            (result,) = self.core.run(fn_name, [part], self._io)
        if isinstance(result, Fault):
            raise result.error
        return result.outputs

    async def call(self, fn: str, model: ModelRef | None, inputs: dict[str, torch.Tensor | None],
                   params: dict[str, Any] | None = None) -> dict[str, torch.Tensor]:
        if on_compute_thread():
            return self.run(fn, model, inputs, params)   # already on it (run_on_compute, a pack's sync code)
        ctx = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(
            COMPUTE, ctx.run, self.run, fn, model, inputs, params)

    def free(self, unload_models: bool = True) -> None:
        if unload_models:
            with self._lock:
                self.core.unload()


_default: LocalRuntime | None = None


def default_local_runtime() -> LocalRuntime:
    global _default
    if _default is None:
        _default = LocalRuntime()
    return _default
