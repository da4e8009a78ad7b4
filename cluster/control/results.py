"""Results: what an executor's `Done` or `Failed` settles, and delivering it on the caller's loop.

`Results.finished` takes an executor's answer to one dispatch: it charges the measured time, feeds
the cost model, scaling and load measurements, and resolves the caller's future with a `Result`
(output tensor metadata, read from shared memory by the caller) or the error that says why not.
Outputs nobody will read (a late answer, a cancelled caller) have their reference given up.

`LoopReaders.result` awaits a future while the awaiting event loop also reads the head's socket: the
executor's reply is then handled in the awaiting thread as soon as it lands, instead of by the head
thread handing the result over to that loop (a thread wake-up and a loop wake-up: the largest part of
a short invocation's round trip on a busy host)."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures as cf
import threading
from collections.abc import Callable
from dataclasses import dataclass

from cluster import messages as m
from cluster.control.errors import InputLost, ModelFnError, RequestCancelled
from cluster.control.lineage import Lineage
from cluster.control.loads import MeasuredLoads
from cluster.control.membership import ExecutorState
from cluster.dataplane import remote, segments
from cluster.dataplane.host_teams import HostTeams
from cluster.dataplane.refcounts import RefClient
from cluster.dataplane.segments import SegmentError
from cluster.scheduling.costs import CostModel
from cluster.scheduling.scaling import ScalingController


@dataclass(frozen=True)
class Result:
    outputs: dict[str, m.TensorHandle]
    nulls: list[str]
    executor: str
    measured_s: float
    wall_s: float
    attempts: int
    batch: int = 1  # invocations that shared the run (measured_s is this one's share)
    batch_s: float = 0.0  # the shared run's measured time


class Results:
    def __init__(
        self,
        lineage: Lineage,
        costs: CostModel,
        scaling: ScalingController,
        loads: MeasuredLoads,
        teams: HostTeams,
        counters: collections.Counter,
        secret: bytes | None,
    ) -> None:
        self.lineage = lineage
        self.costs, self.scaling, self.loads, self.teams = costs, scaling, loads, teams
        self.counters = counters
        self.secret = secret
        # called with every Done/Failed the head handles (benchmarks read the executors' wall times)
        self.listeners: list[Callable[[m.Done | m.Failed], None]] = []
        self._refs = RefClient()  # to release outputs nobody will read
        self._remote: remote.RemotePeers | None = None  # to release outputs on other hosts

    def finished(self, ex: ExecutorState, msg: m.Done | m.Failed) -> None:
        for listener in self.listeners:
            listener(msg)
        job = ex.inflight.pop(msg.dispatch_id, None)
        if job is None:
            if msg.dispatch_id in ex.zombies:  # it finished after all; its result is not wanted
                ex.zombies.discard(msg.dispatch_id)
                ex.draining = bool(ex.zombies) or self.teams.waiting(ex.id)
            if isinstance(msg, m.Done):
                self.discard(msg.outputs)
            return
        ex.completed += 1
        self.lineage.scheduler.complete(job.inv, msg.measured_s)  # a batch part: its share of the run
        if isinstance(msg, m.Done):
            ex.pulls.update(shm=msg.shm_pulls, tcp=msg.tcp_pulls, tcp_bytes=msg.tcp_bytes)
            ex.device_peak = max(ex.device_peak, msg.device_peak)
            self.loads.observe_transfer(msg.tcp_bytes, msg.tcp_s)
        if isinstance(msg, m.Done) and msg.load_s > 0 and job.inv.model_key:
            # The latest load is the estimate: every executor loads a model from the same files, and
            # the latest measurement reflects the host as it is now (page cache, contention).
            self.loads.measured[job.inv.model_key] = msg.load_s
        self.lineage.untrack(job)
        if isinstance(msg, m.Done):
            if job.batched and msg.batch == 1:
                self.counters["batch_fallbacks"] += 1  # the merged run failed; this part ran alone
            ex.memory_used, ex.cached_models = msg.memory_used, set(msg.cached_models)
            self.costs.observe(job.inv.fn, job.inv.model_key, job.shapes, msg.measured_s)
            self.scaling.observe(job.inv.model_key, msg.measured_s)
            self.counters["completed"] += 1
            if job.future.done():
                self.discard(msg.outputs)
            else:
                job.future.set_result(
                    Result(
                        msg.outputs, msg.nulls, ex.id, msg.measured_s, msg.wall_s, job.attempts, msg.batch, msg.batch_s
                    )
                )
        elif msg.lost_input:
            # not the ModelFn's fault and not the request's end: the caller re-sends the input
            self.counters["lost_inputs"] += 1
            self.lineage.fail(job, InputLost(f"an input of {job.inv.fn!r} was lost: {msg.error}"))
        else:
            self.counters["failed"] += 1
            err = ModelFnError(f"ModelFn {job.inv.fn!r} failed on executor {ex.id}: {msg.error}", msg.traceback)
            self.lineage.fail(job, err)
            self.lineage.fail_request(
                job.inv.request, RequestCancelled(f"request {job.inv.request}: another invocation failed: {msg.error}")
            )

    def discard(self, outputs: dict[str, m.TensorHandle]) -> None:
        """Outputs no caller will read: give up the reference they were published with."""
        for meta in outputs.values():
            if not meta.refs:
                segments.unlink(meta.segment)  # an unmanaged one-off segment
                continue
            try:
                if remote.over_tcp(meta, ""):
                    if self._remote is None:
                        self._remote = remote.RemotePeers(self.secret, timeout_s=2.0)
                    self._remote.add(meta, -1)  # on the head thread: a short wait, only for strays
                else:
                    self._refs.add(meta.refs, meta.slot, meta.generation, -1)
            except SegmentError:
                pass  # its producer is gone, and the tensor with it

    def close(self) -> None:
        if self._remote is not None:
            self._remote.close()


def _nothing() -> None:
    pass


def _copy_outcome(done: cf.Future, waiter: asyncio.Future) -> None:
    if waiter.cancelled():
        return
    err = done.exception()
    if err is not None:
        waiter.set_exception(err)
    else:
        waiter.set_result(done.result())


class LoopReaders:
    """The event loops awaiting results, each reading the head's socket (`fd`, set once it is bound)
    while it awaits and the head runs (`running()`). `call(fn)` does head work (cluster.control.worker);
    `wake()` wakes the head thread, which watches the socket itself again once no loop reads it."""

    def __init__(
        self, call: Callable[[Callable[[], None]], None], wake: Callable[[], None], running: Callable[[], bool]
    ) -> None:
        self.call, self.wake, self.running = call, wake, running
        self.fd = -1
        self.loops: dict[asyncio.AbstractEventLoop, int] = {}  # loop -> results it awaits

    def __contains__(self, loop: asyncio.AbstractEventLoop) -> bool:
        return loop in self.loops

    def __bool__(self) -> bool:
        return bool(self.loops)

    async def result(self, future: cf.Future) -> Result:
        """Await a `Head.submit` future; a reply handled in this thread also resolves the awaited future
        directly, not through the loop's self-pipe."""
        loop = asyncio.get_running_loop()
        if loop not in self.loops and self.running():
            loop.add_reader(self.fd, self.call, _nothing)  # `call` pumps: receives, then dispatches
            self.loops[loop] = 0
        reading = loop in self.loops
        if reading:
            self.loops[loop] += 1
        try:
            if future.done():
                return future.result()
            waiter = loop.create_future()
            here = threading.get_ident()

            def resolve(done: cf.Future) -> None:
                if threading.get_ident() == here:
                    _copy_outcome(done, waiter)
                else:
                    loop.call_soon_threadsafe(_copy_outcome, done, waiter)

            future.add_done_callback(resolve)
            return await waiter
        finally:
            if reading:
                self.loops[loop] -= 1
                if not self.loops[loop]:
                    # a chain of calls awaits its next result within this loop step: keep reading
                    loop.call_soon(self._stop_reading, loop)

    def _stop_reading(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.loops.get(loop) == 0:
            del self.loops[loop]
            loop.remove_reader(self.fd)
            if not self.loops:
                self.wake()  # the head thread watches the socket again (from this loop's thread)
