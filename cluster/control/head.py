"""The control plane: executors connect to one ZeroMQ ROUTER socket; the head registers them, tracks
their heartbeats, declares them lost, and dispatches ready invocations chosen by the scheduler.
Callers get a `concurrent.futures.Future` per invocation; it resolves to a `Result` (output tensor
metadata, read from shared memory by the caller) or raises one of cluster.control.errors.

The head is composed of parts with one concern each, which it wires together and routes messages to:
- transport (cluster.control.transport): the socket, sending, receiving and decoding;
- membership and liveness (cluster.control.membership): the challenge and proof of an executor that
  joins over tcp:// with a cluster secret, its registration, heartbeats, and when it counts as lost;
- lineage and re-runs (cluster.control.lineage): each request's invocations in flight, re-run when
  their executor is lost (up to `max_attempts` dispatches), failed past their deadline or with their request;
- teams and preloads (cluster.dataplane.host_teams, cluster.control.preloads): the NVSHMEM team of each
  host's GPU executors, and which models idle executors fill their free memory with (§5.1);
- results (cluster.control.results): what a Done or Failed settles, delivered on the caller's loop;
- the work itself (cluster.control.worker): one lock, and whichever thread holds it does the head's work.

What runs where and when (placement, parking for a warm executor, batching, charging) is decided by
cluster.scheduling.dispatcher, the same policy the simulator drives; the head applies its assignments:
it keeps the jobs, sends one `Dispatch` or one `BatchDispatch` (whose parts are answered one by one),
and tells the dispatcher what arrived, failed or was lost. It also supplies what the policy cannot
know: each model's load time and the time inputs take to cross hosts (cluster.control.loads), and when
busy executors are expected to be free. The head thread's sleep ends when a batch window closes or a
parked invocation has waited its load time.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import itertools
import logging
import socket
import time
from collections.abc import Callable
from typing import Any

from cluster import messages as m
from cluster.call import ModelFnCall
from cluster.control.errors import ClusterError, RequestCancelled
from cluster.control.lineage import Job, Lineage
from cluster.control.liveness import Liveness
from cluster.control.loads import MeasuredLoads
from cluster.control.membership import ExecutorState, Membership
from cluster.control.preloads import Preloads
from cluster.control.results import LoopReaders, Result, Results
from cluster.control.stats import head_stats
from cluster.control.transport import Transport
from cluster.control.worker import HeadWorker
from cluster.dataplane import remote
from cluster.executor.options import HEARTBEAT_S, default_address
from cluster.scheduling.costs import CostModel
from cluster.scheduling.dispatcher import Dispatcher
from cluster.scheduling.policies import make_scheduler
from cluster.scheduling.scaling import ScalingController
from cluster.scheduling.tenant_scheduler import Invocation
from cluster.scheduling.warm_wait import WarmWaitPolicy

log = logging.getLogger("cluster.head")


class Head:
    def __init__(
        self,
        address: str | None = None,
        *,
        policy: str = "vtime",
        delta: float = 1.0,
        heartbeat_s: float = HEARTBEAT_S,
        lost_after_s: float = 3.0,
        deadline_s: float = 600.0,
        max_attempts: int = 3,
        slots_per_executor: int = 1,
        costs: CostModel | None = None,
        tick_s: float = 0.05,
        scaling: ScalingController | None = None,
        max_batch: int = 1,
        batch_window_s: float = 0.02,
        warm_wait: WarmWaitPolicy | None = None,
        secret: bytes | None = None,
        **scheduler_kw: Any,
    ) -> None:
        self.secret = secret  # executors must prove they know it (None: any executor may join)
        self.policy, self.delta = policy, delta
        self.deadline_s = deadline_s
        self.tick_s = tick_s
        self.costs = costs or CostModel()
        self.scaling = scaling or ScalingController()
        self.scheduler = make_scheduler(policy, delta, **scheduler_kw)
        self.counters = collections.Counter()
        self.host, self.host_id = socket.gethostname(), remote.host_id()
        self.local_cluster: Any = None  # set by start_local_cluster: the executor processes it supervises
        self.ray_executors: Any = None  # set by start_ray_cluster: the Ray actors it places
        self.loads = MeasuredLoads()
        self.dispatcher = Dispatcher(
            self.scheduler,
            self.loads,
            slots=slots_per_executor,
            max_batch=max_batch,
            batch_window_s=batch_window_s,
            warm_wait=warm_wait,
            scaling=self.scaling,
        )
        self.transport = Transport(address or default_address(), self.counters)
        self.members = Membership(secret, self.transport.reply, self.counters, self.host, self.host_id)
        self.lineage = Lineage(self.scheduler, self.dispatcher, self.counters, max_attempts)
        self.liveness = Liveness(
            self.members,
            self.transport,
            self.lineage,
            self.counters,
            heartbeat_s,
            lost_after_s,
            self._files_address,
            self._exit_cause,
        )
        self.teams = self.liveness.teams  # the NVSHMEM team of each host's GPU executors
        self.preloads = Preloads(self.costs)
        self.results = Results(self.lineage, self.costs, self.scaling, self.loads, self.teams, self.counters, secret)
        self.worker = HeadWorker(self._step, self._broke, self._wait_s, lambda: bool(self.readers), self._stopped)
        self.readers = LoopReaders(self.worker.call, self.worker.wake, lambda: self.worker.running)
        self._ids = itertools.count(1)
        self._next_check = 0.0
        self._on_stop: list[Callable[[], None]] = []
        self.decision_times: collections.deque[float] = collections.deque(maxlen=200_000)

    # lifecycle -------------------------------------------------------------------------------------
    def start(self) -> Head:
        self.transport.bind()
        self.readers.fd = self.transport.fd
        self.worker.start(self.transport.fd)
        return self

    @property
    def running(self) -> bool:
        """Started and not stopped yet."""
        return self.worker.running

    @property
    def address(self) -> str:
        return self.transport.address

    @property
    def reachable_address(self) -> str:
        """The address executors on other machines connect to (cluster.control.transport)."""
        return self.transport.reachable_address

    @property
    def data_ip(self) -> str | None:
        """Where this process serves its own tensors to executors on other hosts (cluster.control.transport)."""
        return self.transport.data_ip

    @property
    def heartbeat_s(self) -> float:
        return self.liveness.heartbeat_s

    @property
    def lost_after_s(self) -> float:
        return self.liveness.lost_after_s

    @property
    def executors(self) -> dict[str, ExecutorState]:
        return self.members.executors

    @property
    def completion_listeners(self) -> list[Callable[[m.Done | m.Failed], None]]:
        """Called with every Done/Failed the head handles (benchmarks read the executors' wall times)."""
        return self.results.listeners

    def _files_address(self) -> str:
        """The data socket of this process that serves the model files its ModelRefs name to executors that
        have no copy (cluster.dataplane.model_files): where executors can be elsewhere and must know the
        cluster secret; else none."""
        if self.secret is None or self.data_ip is None:
            return ""
        from cluster.dataplane.caller_store import caller_store

        return caller_store().store.serve(self.data_ip, self.secret)

    def executor_exited(self, pid: int, cause: str) -> None:
        """A supervisor saw the executor process `pid` of this host exit: lose it now, with the real
        cause (exit code or signal, its last stderr lines) rather than a missing heartbeat later."""

        self.worker.call(lambda: self.liveness.exited(pid, cause))

    def on_stop(self, fn: Callable[[], None]) -> None:
        self._on_stop.append(fn)

    def watch_lost(self, fn: Callable[[str], None]) -> None:
        """Call `fn(segment prefix)` (on the head thread) whenever an executor is lost; idempotent."""
        if fn not in self.liveness.lost_watchers:
            self.liveness.lost_watchers.append(fn)

    def stop(self) -> None:
        if not self.worker.running:
            return
        self.worker.call(self.liveness.shutdown_all)
        self.worker.stop()
        for fn in self._on_stop:
            fn()
        with self.worker.lock:
            self.transport.close()
            self.results.close()
        self.transport.unlink()

    def wait_for_executors(self, n: int, timeout: float = 60.0) -> None:
        """Return once `n` executors have registered, or the head has stopped; TimeoutError after `timeout`."""
        end = time.monotonic() + timeout
        while len(self.executors) < n and self.running:
            if time.monotonic() > end:
                raise TimeoutError(f"{len(self.executors)} of {n} executors registered in {timeout}s")
            time.sleep(0.02)

    # the API for callers (any thread) --------------------------------------------------------------
    def submit(
        self,
        *,
        tenant: str,
        request: str,
        fn: str,
        model_key: str,
        call: ModelFnCall,
        inputs: dict[str, m.TensorHandle],
        nulls: list[str],
        shapes: tuple = (),
        remaining_s: float = 0.0,
        deadline_s: float | None = None,
        batch_key: str | None = None,
        batch_size: int = 1,
        spread: bool = False,
    ) -> cf.Future:
        """Queue one invocation of `call` (the runtime's message, sent to the executor as it is); the future
        resolves to a `Result` or raises a ClusterError.
        `batch_key` (cluster.scheduling.batching.batch_tag): invocations with equal keys may run as one batch.
        `spread`: never parked for a busy holder of its weights (cluster.runtime.Runtime.call)."""
        fut: cf.Future = cf.Future()
        fut.set_running_or_notify_cancel()
        owners: dict[str, int] = collections.Counter()
        hosts: dict[str, int] = collections.Counter()
        for meta in inputs.values():
            owners[meta.owner] += meta.nbytes
            hosts[meta.host or self.host_id] += meta.nbytes

        def enqueue() -> None:
            inv = Invocation(
                id=next(self._ids),
                tenant=tenant,
                request=request,
                fn=fn,
                model_key=model_key,
                estimate=self.costs.estimate(fn, model_key, shapes),
                remaining=remaining_s,
                input_bytes=dict(owners),
                input_hosts=dict(hosts),
                batch_key=batch_key,
                batch_size=batch_size,
                spread=spread,
            )
            d = m.Dispatch(0, fn, model_key, call, inputs, nulls, deadline_s or self.deadline_s)
            self.lineage.track(Job.of(inv, d, shapes, fut))
            if model_key:
                self.preloads.remember(model_key, fn, call)
                self.dispatcher.expect(model_key)
            self.dispatcher.add(inv)

        self.worker.call(enqueue)
        return fut

    def expect(self, *, fn: str, model_key: str, call: ModelFnCall, n: float = 1.0) -> None:
        """A controller expects `n` invocations of `fn` on `model_key` (`call` one of them, as `submit`'s,
        whose model says how to load it) before any is queued: executors preload its first layers."""

        def note() -> None:
            self.preloads.remember(model_key, fn, call)
            self.dispatcher.expect(model_key, n)

        self.worker.call(note)

    async def result(self, future: cf.Future) -> Result:
        """Await a `submit` future while this event loop also reads the head's socket (cluster.control.results)."""
        return await self.readers.result(future)

    def set_batch_size(self, model_key: str, n: int) -> None:
        """Samples one executor may run at once for this model (1: no batching); overrides `max_batch`."""
        self.dispatcher.set_batch_size(model_key, n)  # one dict store: safe from any thread

    def batch_size(self, model_key: str) -> int:
        return self.dispatcher.batch_size(model_key)

    # the dispatcher's settings, read and set by the CLI and tests
    @property
    def max_batch(self) -> int:
        return self.dispatcher.max_batch

    @property
    def batch_window_s(self) -> float:
        return self.dispatcher.batch_window_s

    @batch_window_s.setter
    def batch_window_s(self, value: float) -> None:
        self.dispatcher.batch_window_s = value

    @property
    def warm_wait(self) -> WarmWaitPolicy:
        return self.dispatcher.warm_wait

    @warm_wait.setter
    def warm_wait(self, policy: WarmWaitPolicy) -> None:
        self.dispatcher.warm_wait = policy

    def cancel_request(self, request: str, reason: str = "cancelled") -> None:
        """Fail the request's queued invocations (running ones finish; their results are dropped)."""
        self.worker.call(lambda: self.lineage.fail_request(request, RequestCancelled(f"request {request}: {reason}")))

    def set_tenant_weight(self, tenant: str, weight: float) -> None:
        self.worker.call(lambda: self.scheduler.set_weight(tenant, weight))

    def idle_executors(self) -> int:
        """Executors with nothing running or sent to them, while no invocation waits: how many calls submitted
        now would start at once, each on its own executor (0 while anything waits)."""
        with self.worker.lock:
            if self.dispatcher.pending():
                return 0
            return sum(1 for ex in self.executors.values() if not ex.inflight and not ex.draining and not ex.zombies)

    def retire(self, executor_id: str) -> bool:
        """Shut the executor down if it is idle (nothing running or sent to it), as scaling in does: True
        if it was. It says goodbye and is forgotten; whoever started it ends its process."""
        retired: list[bool] = []
        self.worker.call(lambda: retired.append(self.liveness.retire(executor_id)))
        return bool(retired and retired[0])

    def stats(self) -> dict[str, Any]:
        with self.worker.lock:
            return head_stats(self)

    # the head's work (under the worker's lock) -------------------------------------------------------
    def _step(self) -> bool:
        self.transport.receive(self._handle)
        if time.monotonic() >= self._next_check:
            self.preloads.send(self.dispatcher.preload_order(), self.executors.values(), self.liveness.send)
            self.liveness.check(time.monotonic())
            self._next_check = time.monotonic() + self.tick_s
        self._dispatch()
        return self.transport.has_input()

    def _broke(self, e: Exception) -> None:
        self.lineage.fail_all(ClusterError(f"cluster head error: {e!r}"))

    def _stopped(self) -> None:
        self.lineage.fail_all(ClusterError("the cluster head stopped"))

    def _wait_s(self) -> float:
        """How long the head thread may sleep: a tick, or until the next batch window closes or a
        parked invocation has waited its load time (one already due waits for an executor, whose
        reply wakes the thread)."""
        now = time.monotonic()
        with self.worker.lock:
            until = self.dispatcher.wake_at(now)
        return self.tick_s if until is None else min(self.tick_s, until - now)

    def _handle(self, identity: bytes, msg: m.ToHead) -> None:
        if isinstance(msg, m.Hello):
            self.members.challenge(identity, msg)
            return
        if isinstance(msg, m.Register):
            self.liveness.register(identity, msg)
            return
        ex = self.members.find(identity)
        if ex is None:
            # a lost executor coming back, or a stranger: ask it to (re)register; drop its news
            self.transport.reply(identity, m.Reset())
            if isinstance(msg, m.Done):
                self.results.discard(msg.outputs)
            return
        ex.last_seen = time.monotonic()
        if isinstance(msg, m.Heartbeat):
            self.members.heard(ex, msg)
        elif isinstance(msg, (m.Done, m.Failed)):
            self.results.finished(ex, msg)
        elif isinstance(msg, m.Bye):
            self.liveness.lose(ex, f"said goodbye: {msg.reason}", expected=msg.reason == "shutdown")
        elif isinstance(msg, m.TeamJoined):
            self.teams.joined(ex.id, msg)
            ex.draining = bool(ex.zombies) or self.teams.waiting(ex.id)

    def _exit_cause(self, ex: ExecutorState) -> str | None:
        """How a local executor's process ended (its signal and last stderr lines), when it has."""
        if self.local_cluster is None or not self.members.same_host(ex):
            return None
        return self.local_cluster.exit_cause(ex.pid)

    # dispatching (cluster.scheduling.dispatcher decides; the head sends) ------------------------------
    def _dispatch(self) -> None:
        d = self.dispatcher
        if not d.pending():
            return
        waits = d.waits_started
        for a in d.schedule(time.monotonic(), self.executors.values()):
            self._send_to(a.executor, [inv.payload for inv in a.invocations])
        if d.waits_started != waits:
            self.worker.wake_from_elsewhere()  # a batch window opened or an invocation parked: the head thread wakes for it

    def _send_to(self, ex: ExecutorState, live: list[Job]) -> None:
        """Send the jobs to `ex`: one Dispatch, or one BatchDispatch for several."""
        now = time.monotonic()
        self.lineage.dispatched(live, ex, self._ids, now)
        self.decision_times.append(now)
        self.liveness.send(ex, live[0].dispatch if len(live) == 1 else m.BatchDispatch([job.dispatch for job in live]))
