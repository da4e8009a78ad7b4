"""The control plane: executors connect to one ZeroMQ ROUTER socket; the head registers them, tracks
their heartbeats, declares them lost, and dispatches ready invocations chosen by the scheduler.

All state is guarded by one lock, and whichever thread holds it does the head's work: a caller's
`submit` schedules and sends the dispatch from its own thread, so a call does not wait for another
thread to wake up; the head thread handles what arrives from executors and the periodic checks. The
ZeroMQ socket is then used from several threads, always under the lock, and the head thread waits on
the socket's signalling file descriptor, never on the socket itself (zmq.FD, edge-triggered: after
every use of the socket its events are read again and anything pending is handled at once).
Callers get a `concurrent.futures.Future` per invocation; it resolves to a `Result` (output tensor
metadata, read from shared memory by the caller) or raises one of the errors below.

Executors on other machines: the head binds `tcp://IP:PORT` and, given a cluster secret
(cluster.secret), takes only executors that prove they know it: an executor's `Hello` carries a
nonce, the head's `Challenge` answers with its own and an HMAC proving the head knows the secret,
and the `Register` that follows must carry the HMAC of both nonces; anything else is `Refused`, with
a log line on both sides. Inputs that live on another host than the executor considered cost the
time to cross (`transfer_s`, from the bandwidth executors measured): placement prefers the host that
holds them, and the tenant is charged the transfer when it cannot.

Fault tolerance: ModelFns are deterministic given inputs and params, so an invocation running on an
executor that is lost (no heartbeat for `lost_after_s`, SIGKILL, disconnect) is refunded and queued
again, up to `max_attempts` dispatches. Its inputs are in the caller's segments, which outlive it.

What runs where and when (placement, parking for a warm executor, batching, charging) is decided by
cluster.scheduling.dispatcher, the same policy the simulator drives; the head applies its assignments: it keeps
the jobs, sends one `Dispatch` or one `BatchDispatch` (whose parts are answered one by one), and
tells the dispatcher what arrived, failed or was lost. It also supplies what the policy cannot know:
each model's load time (the latest `load_s` an executor reported; a model never loaded is never
waited for) and when busy executors are expected to be free (their running work's estimates minus
the time it has run). The head thread's sleep ends when a batch window closes or a parked
invocation has waited its load time.

Preloading (§5.1): the dispatcher also keeps what demand the head learned of (each invocation queued,
and each model a controller announces with `expect`) and decides which models an idle executor fills
its free memory with (`Dispatcher.preload_order`, the simulator's decision too); the head sends each
executor that list, when it changes, as a `Preload` naming how to load each model (the ModelFn and
payload of its latest invocation or announcement), and the executor does the rest (cluster.executor.preloader).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures as cf
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import zmq

from cluster import messages as m
from cluster import secret as cluster_secret
from cluster.dataplane import remote, segments
from cluster.dataplane.caller_store import caller_pulls
from cluster.dataplane.host_teams import HostTeams
from cluster.dataplane.refcounts import RefClient
from cluster.dataplane.segments import SegmentError
from cluster.executor.options import HEARTBEAT_S, default_address
from cluster.scheduling.costs import CostModel
from cluster.scheduling.dispatcher import Dispatcher
from cluster.scheduling.interface import ExecutorView
from cluster.scheduling.policies import make_scheduler
from cluster.scheduling.scaling import ScalingController
from cluster.scheduling.tenant_scheduler import Invocation
from cluster.scheduling.warm_wait import WarmWaitPolicy

log = logging.getLogger("cluster.head")


class ClusterError(RuntimeError):
    """An invocation could not produce its outputs."""


class ModelFnError(ClusterError):
    """The ModelFn raised on its executor; the message carries the remote exception text."""

    def __init__(self, message: str, remote_traceback: str = "") -> None:
        super().__init__(message)
        self.remote_traceback = remote_traceback


class DeadlineExceeded(ClusterError, TimeoutError):
    """The invocation ran longer than its deadline."""


class ExecutorLost(ClusterError):
    """Every executor that ran the invocation was lost (`max_attempts` times)."""


class RequestCancelled(ClusterError):
    """The request was cancelled (or another of its invocations failed) before this one ran."""


class InputLost(ClusterError):
    """An input's producer was lost before the executor read it; the caller re-sends its own copy."""


@dataclass(frozen=True)
class Result:
    outputs: dict[str, m.TensorMeta]
    nulls: list[str]
    executor: str
    measured_s: float
    wall_s: float
    attempts: int
    batch: int = 1  # invocations that shared the run (measured_s is this one's share)
    batch_s: float = 0.0  # the shared run's measured time


@dataclass(eq=False)
class Job:
    inv: Invocation[Job]
    dispatch: m.Dispatch  # dispatch_id is rewritten per attempt
    shapes: tuple
    future: cf.Future
    attempts: int = 0
    dispatched_at: float = 0.0
    executor: ExecutorState | None = None
    batched: bool = False  # its last dispatch was a part of a BatchDispatch


@dataclass(eq=False)
class ExecutorState:
    id: str
    identity: bytes
    host: str
    pid: int
    device: str
    threads: int
    memory_budget: int
    memory_used: int
    cached_models: set[str]
    shm_prefix: str
    last_seen: float
    host_id: str = ""
    ip: str = ""
    data_address: str = ""
    reported_queue: int = 0
    inflight: dict[int, Job] = field(default_factory=dict)
    zombies: set[int] = field(default_factory=set)  # aborted dispatches still occupying it
    draining: bool = False
    completed: int = 0
    warmed: list[str] = field(default_factory=list)  # ModelFns it warmed up before registering
    warm_s: float = 0.0
    pulls: collections.Counter = field(default_factory=collections.Counter)  # its runs' input pulls
    device_peak: int = 0  # its CUDA allocator's peak, as its last Done said
    prefixes: dict[str, list[int]] = field(default_factory=dict)  # preloaded: model -> [resident, L_e, layers]
    preload_sent: list[str] = field(default_factory=list)  # the last preload order sent to it

    @property
    def load(self) -> int:
        return len(self.inflight) + len(self.zombies)

    def free_in(self, now: float) -> float:
        """Seconds until it is expected to start another invocation. It runs its dispatches one after
        another since the oldest was sent, so their estimates add up; the parts of a batch share one
        run, counted as its longest part's estimate (an underestimate for large batches)."""
        alone = batched = 0.0
        started = now
        for job in self.inflight.values():
            if job.batched:
                batched = max(batched, job.inv.estimate)
            else:
                alone += job.inv.estimate
            started = min(started, job.dispatched_at)
        return max(0.0, alone + batched - (now - started))


DEFAULT_TRANSFER_BPS = 1e9  # bytes/s assumed across hosts until executors have measured a pull


class MeasuredLoads:
    """The head's load costs for the dispatcher: a model's latest measured load time on any executor
    (every executor loads a model from the same files, and the latest measurement reflects the host
    as it is now: page cache, contention); and the time inputs take to cross hosts, from the bandwidth
    of the executors' TCP pulls."""

    def __init__(self) -> None:
        self.measured: dict[str, float] = {}  # model key -> its latest measured load time
        self.transfer_bps = DEFAULT_TRANSFER_BPS

    def observe_transfer(self, nbytes: int, seconds: float) -> None:
        if nbytes >= 1 << 20 and seconds > 0:  # small pulls measure latency, not bandwidth
            self.transfer_bps = 0.7 * self.transfer_bps + 0.3 * nbytes / seconds

    def load_s(self, ex: ExecutorView, inv: Invocation) -> float | None:
        return self.measured.get(inv.model_key) if inv.model_key else None

    def exposed_load_s(self, ex: ExecutorView, inv: Invocation) -> float:
        key = inv.model_key
        return self.measured.get(key, 0.0) if key and key not in ex.cached_models else 0.0

    def prepare(self, inv: Invocation, free: Sequence[ExecutorView]) -> None:
        """Seconds `inv`'s inputs would take to reach each free executor: the bytes not on its host
        (with `--data-plane tcp`, not in its own arena) over the measured bandwidth."""
        total = sum(inv.input_bytes.values())
        if not total:
            return
        tcp = remote.mode() == "tcp"
        inv.transfer_s = {}
        for ex in free:
            near = inv.input_bytes.get(ex.id, 0) if tcp else inv.input_hosts.get(getattr(ex, "host_id", ""), 0)
            if total > near:
                inv.transfer_s[ex.id] = (total - near) / self.transfer_bps


def _alive(pid: int) -> bool:
    """Whether a process of this host is running (a zombie, killed but not yet reaped, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


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
        self.requested_address = address or default_address()
        self.secret = secret  # executors must prove they know it (None: any executor may join)
        self.address = self.requested_address
        self.policy = policy
        self.delta = delta
        self.heartbeat_s = heartbeat_s
        self.lost_after_s = lost_after_s
        self.deadline_s = deadline_s
        self.max_attempts = max_attempts
        self.slots = slots_per_executor
        self.costs = costs or CostModel()
        self.scaling = scaling or ScalingController()
        self.tick_s = tick_s
        self.scheduler = make_scheduler(policy, delta, **scheduler_kw)
        self.executors: dict[str, ExecutorState] = {}
        self._by_identity: dict[bytes, ExecutorState] = {}
        self._jobs_by_request: dict[str, set[Job]] = {}
        self._calls: collections.deque[Callable[[], None]] = collections.deque()  # deferred, see _call
        self._wake_r, self._wake_w = socket.socketpair()  # wakes the head thread to stop
        self._lock = threading.Lock()
        self._holder: int | None = None  # thread ident holding the lock for head work
        self._next_check = 0.0
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._running = False
        self._on_stop: list[Callable[[], None]] = []
        self._decision_times: collections.deque[float] = collections.deque(maxlen=200_000)
        self.counters = collections.Counter()
        self.host = socket.gethostname()
        self.host_id = remote.host_id()
        self._challenges: collections.OrderedDict[bytes, tuple[bytes, bytes]] = collections.OrderedDict()
        self._remote: remote.RemotePeers | None = None  # to release outputs on other hosts
        self.local_cluster: Any = None  # set by start_local_cluster: the executor processes it supervises
        self.ray_executors: Any = None  # set by start_ray_cluster: the Ray actors it places
        self._refs = RefClient()  # to release outputs nobody will read
        self._lost_watchers: list[Callable[[str], None]] = []
        self._loads = MeasuredLoads()
        # called with every Done/Failed the head handles (benchmarks read the executors' wall times)
        self.completion_listeners: list[Callable[[m.Done | m.Failed], None]] = []
        self.dispatcher = Dispatcher(
            self.scheduler,
            self._loads,
            slots=slots_per_executor,
            max_batch=max_batch,
            batch_window_s=batch_window_s,
            warm_wait=warm_wait,
            scaling=self.scaling,
        )
        self._readers: dict[asyncio.AbstractEventLoop, int] = {}  # loops awaiting results, see `result`
        self.teams = HostTeams(self._send_team)  # the NVSHMEM team of each host's GPU executors
        self._recipes: dict[str, tuple[str, bytes]] = {}  # model key -> (ModelFn, payload) that loads it

    # lifecycle -------------------------------------------------------------------------------------
    def start(self) -> Head:
        ctx = zmq.Context.instance()
        self._sock = ctx.socket(zmq.ROUTER)
        self._sock.setsockopt(zmq.ROUTER_MANDATORY, 1)  # sending to a vanished executor raises
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(self.requested_address)
        self.address = self._sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self._fd = self._sock.getsockopt(zmq.FD)
        self._running = True
        self._thread = threading.Thread(target=self._loop, name="cluster-head", daemon=True)
        self._thread.start()
        return self

    @property
    def reachable_address(self) -> str:
        """The address executors on other machines connect to: `address` with a wildcard host (tcp://0.0.0.0)
        replaced by this machine's IP on its default route."""
        if self.address.startswith("tcp://"):
            host, port = self.address[len("tcp://") :].rsplit(":", 1)
            if host.strip("[]") in ("0.0.0.0", "*", "::"):
                return f"tcp://{remote.local_ip('')}:{port}"
        return self.address

    @property
    def data_ip(self) -> str | None:
        """Where this process serves its own tensors to executors on other hosts (the head's IP), or
        None when none can be elsewhere (an ipc:// head, shared memory allowed)."""
        if self.address.startswith("tcp://"):
            host = self.address[len("tcp://") :].rsplit(":", 1)[0].strip("[]")
            return remote.local_ip("") if host in ("0.0.0.0", "*", "::") else host
        return "127.0.0.1" if remote.mode() == "tcp" else None

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

        def lose() -> None:
            for ex in list(self.executors.values()):
                if ex.pid == pid and self._same_host(ex):
                    self._lose(ex, cause)

        self._call(lose)

    def on_stop(self, fn: Callable[[], None]) -> None:
        self._on_stop.append(fn)

    def watch_lost(self, fn: Callable[[str], None]) -> None:
        """Call `fn(segment prefix)` (on the head thread) whenever an executor is lost; idempotent."""
        if fn not in self._lost_watchers:
            self._lost_watchers.append(fn)

    def stop(self) -> None:
        if not self._running:
            return
        self._call(self._shutdown_executors)
        with self._lock:
            self._running = False
        self._wake_w.send(b"x")
        if self._thread is not None:
            self._thread.join(timeout=5)
        for fn in self._on_stop:
            fn()
        with self._lock:
            self._sock.close()
            if self._remote is not None:
                self._remote.close()
        if self.address.startswith("ipc://"):
            try:
                os.unlink(self.address[len("ipc://") :])
            except OSError:
                pass

    def wait_for_executors(self, n: int, timeout: float = 60.0) -> None:
        """Return once `n` executors have registered, or the head has stopped; TimeoutError after `timeout`."""
        end = time.monotonic() + timeout
        while len(self.executors) < n and self._running:
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
        payload: bytes,
        inputs: dict[str, m.TensorMeta],
        nulls: list[str],
        shapes: tuple = (),
        remaining_s: float = 0.0,
        deadline_s: float | None = None,
        batch_key: str | None = None,
        batch_size: int = 1,
    ) -> cf.Future:
        """Queue one invocation; the future resolves to a `Result` or raises a ClusterError.
        `batch_key` (cluster.scheduling.batching.batch_tag): invocations with equal keys may run as one batch."""
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
            )
            d = m.Dispatch(0, fn, model_key, payload, inputs, nulls, deadline_s or self.deadline_s)
            job = Job(inv, d, shapes, fut)
            inv.payload = job
            self._jobs_by_request.setdefault(request, set()).add(job)
            if model_key:
                self._recipes[model_key] = (fn, payload)
                self.dispatcher.expect(model_key)
            self.dispatcher.add(inv)

        self._call(enqueue)
        return fut

    def expect(self, *, fn: str, model_key: str, payload: bytes, n: float = 1.0) -> None:
        """A controller expects `n` invocations of `fn` on `model_key` (its `payload` as `submit`'s,
        whose ModelRef says how to load it) before any is queued: executors preload its first layers."""

        def note() -> None:
            self._recipes[model_key] = (fn, payload)
            self.dispatcher.expect(model_key, n)

        self._call(note)

    async def result(self, future: cf.Future) -> Result:
        """Await a `submit` future while this event loop also reads the head's socket. The executor's
        reply is then handled in the awaiting thread as soon as it lands, instead of by the head thread
        handing the result over to this loop: that hand-off (a thread wake-up and a loop wake-up) was
        the largest part of a short invocation's round trip on a busy host. A reply handled here also
        resolves the awaited future directly, not through the loop's self-pipe."""
        loop = asyncio.get_running_loop()
        if loop not in self._readers and self._running:
            loop.add_reader(self._fd, self._call, _nothing)  # _call pumps: receives, then dispatches
            self._readers[loop] = 0
        reading = loop in self._readers
        if reading:
            self._readers[loop] += 1
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
                self._readers[loop] -= 1
                if not self._readers[loop]:
                    # a chain of calls awaits its next result within this loop step: keep reading
                    loop.call_soon(self._stop_reading, loop)

    def _stop_reading(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._readers.get(loop) == 0:
            del self._readers[loop]
            loop.remove_reader(self._fd)
            if not self._readers:
                self._wake_w.send(b"x")  # the head thread watches the socket again (from this loop's thread)

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
        self._call(lambda: self._fail_request(request, RequestCancelled(f"request {request}: {reason}")))

    def set_tenant_weight(self, tenant: str, weight: float) -> None:
        self._call(lambda: self.scheduler.set_weight(tenant, weight))

    def stats(self) -> dict[str, Any]:
        with self._lock:
            now = time.monotonic()
            window = 10.0
            recent = sum(1 for t in self._decision_times if t > now - window)
            return {
                "address": self.address,
                "policy": self.policy,
                "delta": self.delta,
                "executors": [
                    {
                        "id": e.id,
                        "host": e.host,
                        "ip": e.ip,
                        "host_id": e.host_id,
                        "data_address": e.data_address,
                        "pulls": {"shm": e.pulls["shm"], "tcp": e.pulls["tcp"], "tcp_bytes": e.pulls["tcp_bytes"]},
                        "pid": e.pid,
                        "device": e.device,
                        "threads": e.threads,
                        "memory_budget": e.memory_budget,
                        "memory_used": e.memory_used,
                        "cached_models": sorted(e.cached_models),
                        "queue": e.load,
                        "reported_queue": e.reported_queue,
                        "running": [j.inv.fn for j in e.inflight.values()],
                        "completed": e.completed,
                        # what it runs, by dispatch: the ModelFn, its model, the request (a served prompt's id), attempt
                        "inflight": [
                            {
                                "dispatch_id": did,
                                "fn": j.inv.fn,
                                "model": j.inv.model_key,
                                "request": j.inv.request,
                                "tenant": j.inv.tenant,
                                "attempt": j.attempts,
                                "running_s": round(now - j.dispatched_at, 3),
                            }
                            for did, j in e.inflight.items()
                        ],
                        "draining": e.draining,
                        "last_seen_s": round(now - e.last_seen, 3),
                        "nvshmem_team": self.teams.generation(e.host_id) if e.id in self.teams.members else 0,
                        "device_peak": e.device_peak,
                        "preloaded": dict(e.prefixes),
                    }
                    for e in self.executors.values()
                ],
                "tenants": {
                    t.name: {"vtime": t.vtime, "weight": t.weight, "queued": t.queued, "running": t.running}
                    for t in self.scheduler.tenants.values()
                },
                "queued": len(self.scheduler),
                "running": sum(len(e.inflight) for e in self.executors.values()),
                "decisions_total": self.scheduler.decisions,
                "decisions_per_s": recent / window,
                "models": self.scaling.report(list(self.executors.values())),
                "batching": {
                    "max_batch": self.max_batch,
                    "window_s": self.batch_window_s,
                    "batch_sizes": dict(self.dispatcher.batch_caps),
                    "forming": self.dispatcher.forming,
                },
                "batches_dispatched": 0,
                "parts_batched": 0,
                "batch_fallbacks": 0,
                "warm_wait": {
                    "enabled": self.warm_wait.enabled,
                    "max_waiters_per_holder": self.warm_wait.max_waiters_per_holder,
                    "load_s": dict(self._loads.measured),
                },
                "parked": self.dispatcher.parked,
                "warm_waits": 0,
                "warm_wait_hits": 0,
                "completed": 0,
                "failed": 0,
                "reruns": 0,
                "executors_lost": 0,
                "bad_messages": 0,
                "deadline_exceeded": 0,
                "lost_inputs": 0,
                "executors_refused": 0,  # 0 until they first move
                "data_plane": {
                    "mode": remote.mode(),
                    "transfer_GBps": round(self._loads.transfer_bps / 1e9, 3),
                    "caller": caller_pulls(),
                },
                **{k: v for k, v in self.counters.items()},
                **{k: v for k, v in self.dispatcher.counters.items()},
            }

    # head thread -----------------------------------------------------------------------------------
    def _call(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the head's state now, in this thread, then do the work it set in motion
        (dispatches, and messages that arrived meanwhile). From inside head work in this thread (a
        future's callback that submits again) it is deferred until that work is done, and before
        the head starts or after it stops it waits for the head thread (which fails it at the end)."""
        me = threading.get_ident()
        if self._holder == me:
            self._calls.append(fn)
            return
        with self._lock:
            if not self._running:
                self._calls.append(fn)
                return
            self._holder = me
            try:
                fn()
                self._pump()
            finally:
                self._holder = None

    def _pump(self) -> None:
        """Deferred calls, received messages, checks and dispatches until nothing is pending; the
        socket's events are read last, so its file descriptor signals whatever arrives next."""
        try:
            while True:
                while self._calls:
                    self._calls.popleft()()
                self._receive()
                if time.monotonic() >= self._next_check:
                    self._check_executors()
                    self._next_check = time.monotonic() + self.tick_s
                self._dispatch()
                if not self._calls and not self._sock.getsockopt(zmq.EVENTS) & zmq.POLLIN:
                    return
        except Exception as e:  # a bug must fail the requests in flight, never hang them
            log.exception("cluster head loop error")
            for request in list(self._jobs_by_request):
                self._fail_request(request, ClusterError(f"cluster head error: {e!r}"))

    def _loop(self) -> None:
        poller = zmq.Poller()
        poller.register(self._wake_r, zmq.POLLIN)
        watching = False
        me = threading.get_ident()
        while self._running:
            # While an event loop reads the socket (`result`), this thread leaves it to that loop and
            # only wakes for its tick: two threads woken by every reply slowed each other on a small
            # host. The last reader to stop wakes this thread to watch the socket again.
            if watching != (not self._readers):
                watching = not watching
                if watching:
                    poller.register(self._fd, zmq.POLLIN)
                else:
                    poller.unregister(self._fd)
            events = dict(poller.poll(self._wait_s() * 1000))
            if self._wake_r.fileno() in events:
                self._wake_r.recv(65536)
            with self._lock:
                if not self._running:
                    break
                self._holder = me
                try:
                    self._pump()
                finally:
                    self._holder = None
        with self._lock:
            self._holder = me
            while self._calls:
                self._calls.popleft()()
            for request in list(self._jobs_by_request):
                self._fail_request(request, ClusterError("the cluster head stopped"))
            self._holder = None

    def _resleep(self) -> None:
        """Work with a deadline (a batch window, a parked invocation's wait) was set from another
        thread: wake the head thread so that its sleep (`_wait_s`, computed before) ends by then."""
        if self._thread is not None and threading.get_ident() != self._thread.ident:
            self._wake_w.send(b"x")

    def _wait_s(self) -> float:
        """How long the head thread may sleep: a tick, or until the next batch window closes or a
        parked invocation has waited its load time (one already due waits for an executor, whose
        reply wakes the thread)."""
        now = time.monotonic()
        with self._lock:
            until = self.dispatcher.wake_at(now)
        return self.tick_s if until is None else min(self.tick_s, until - now)

    def _receive(self) -> None:
        for _ in range(10_000):  # bounded, so submissions and checks are not starved
            # Events first: reading them keeps the interpreter lock, while an empty recv would let
            # the head thread (woken by the same signal) take it in the middle of a caller's pump.
            if not self._sock.getsockopt(zmq.EVENTS) & zmq.POLLIN:
                return
            try:
                frames = self._sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(frames) != 2:
                log.warning("dropped a message with %d frames", len(frames))
                self.counters["bad_messages"] += 1
                continue
            identity, raw = frames
            try:
                msg = m.head_decoder.decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                log.warning("dropped a bad message from %r: %s", identity[:64], e)
                self.counters["bad_messages"] += 1
                continue
            try:
                self._handle(identity, msg)
            except Exception:  # a well-formed but nonsensical message must not stop the head
                log.exception("dropped a message from %r that could not be handled", identity[:64])
                self.counters["bad_messages"] += 1

    def _send(self, ex: ExecutorState, msg: msgspec.Struct) -> bool:
        try:
            self._sock.send_multipart([ex.identity, m.encode(msg)], zmq.NOBLOCK)
            return True
        except zmq.ZMQError as e:
            self._lose(ex, self._exit_cause(ex) or f"send failed: {e}")
            return False

    def _exit_cause(self, ex: ExecutorState) -> str | None:
        """How a local executor's process ended (its signal and last stderr lines), when it has."""
        if self.local_cluster is None or not self._same_host(ex):
            return None
        return self.local_cluster.exit_cause(ex.pid)

    def _handle(self, identity: bytes, msg: m.ToHead) -> None:
        if isinstance(msg, m.Hello):
            self._challenge(identity, msg)
            return
        if isinstance(msg, m.Register):
            self._register(identity, msg)
            return
        ex = self._by_identity.get(identity)
        if ex is None:
            # a lost executor coming back, or a stranger: ask it to (re)register; drop its news
            try:
                self._sock.send_multipart([identity, m.encode(m.Reset())], zmq.NOBLOCK)
            except zmq.ZMQError:
                pass
            if isinstance(msg, m.Done):
                self._discard(msg.outputs)
            return
        ex.last_seen = time.monotonic()
        if isinstance(msg, m.Heartbeat):
            ex.reported_queue, ex.memory_used, ex.cached_models = msg.queue, msg.memory_used, set(msg.cached_models)
            ex.prefixes = msg.prefixes
        elif isinstance(msg, (m.Done, m.Failed)):
            self._finished(ex, msg)
        elif isinstance(msg, m.Bye):
            self._lose(ex, f"said goodbye: {msg.reason}", expected=msg.reason == "shutdown")
        elif isinstance(msg, m.TeamJoined):
            self.teams.joined(ex.id, msg)
            ex.draining = bool(ex.zombies) or self.teams.waiting(ex.id)

    def _challenge(self, identity: bytes, msg: m.Hello) -> None:
        """Answer a `Hello`: a fresh nonce, and (with a secret) the proof that this head knows it."""
        nonce = os.urandom(16)
        self._challenges[identity] = (msg.nonce[:64], nonce)
        self._challenges.move_to_end(identity)
        while len(self._challenges) > 1000:  # strangers' hellos that never registered
            self._challenges.popitem(last=False)
        theirs = msg.nonce[:64]
        proof = cluster_secret.proof(self.secret, b"head", theirs, nonce) if self.secret is not None else b""
        try:
            self._sock.send_multipart([identity, m.encode(m.Challenge(nonce, proof))], zmq.NOBLOCK)
        except zmq.ZMQError:
            pass

    def _refusal(self, identity: bytes, msg: m.Register) -> str | None:
        """Why `msg` may not register (None: it may): with a secret, its proof must answer our challenge."""
        if self.secret is None:
            return None
        nonces = self._challenges.pop(identity, None)
        if not msg.proof or nonces is None:
            return "it presented no cluster secret"
        theirs, ours = nonces
        if not cluster_secret.verify(self.secret, msg.proof, b"executor", ours, theirs, msg.executor_id.encode()):
            return "its cluster secret does not match this head's"
        return None

    def _register(self, identity: bytes, msg: m.Register) -> None:
        refusal = self._refusal(identity, msg)
        if refusal is not None:
            self.counters["executors_refused"] += 1
            log.warning(
                "refused executor %s (pid %d on %s, %s): %s. Give it the head's secret: "
                "COMFY_CLUSTER_SECRET, or `executor --workspace` with the head's cluster.secret",
                msg.executor_id,
                msg.pid,
                msg.host,
                msg.ip or "address unknown",
                refusal,
            )
            try:
                self._sock.send_multipart([identity, m.encode(m.Refused(refusal))], zmq.NOBLOCK)
            except zmq.ZMQError:
                pass
            return
        old = self.executors.get(msg.executor_id)
        if old is not None:
            self._lose(old, "registered again (restarted)")
        ex = ExecutorState(
            msg.executor_id,
            identity,
            msg.host,
            msg.pid,
            msg.device,
            msg.threads,
            msg.memory_budget,
            msg.memory_used,
            set(msg.cached_models),
            msg.shm_prefix,
            time.monotonic(),
            msg.host_id,
            msg.ip,
            msg.data_address,
            warmed=list(msg.warmed),
            warm_s=msg.warm_s,
        )
        self.executors[ex.id] = ex
        self._by_identity[identity] = ex
        log.info(
            "executor %s registered (%s, %d threads, pid %d on %s%s%s)",
            ex.id,
            ex.device,
            ex.threads,
            ex.pid,
            ex.host,
            f", {ex.ip}, data {ex.data_address}" if ex.data_address else "",
            f"; {len(ex.warmed)} ModelFns warmed up in {ex.warm_s:.1f} s" if ex.warmed else "",
        )
        self._send(ex, m.Welcome(self.heartbeat_s, self._files_address()))
        if msg.nvshmem:
            self.teams.add(ex)

    def retire(self, executor_id: str) -> bool:
        """Shut the executor down if it is idle (nothing running or sent to it), as scaling in does: True
        if it was. It says goodbye and is forgotten; whoever started it ends its process."""
        retired: list[bool] = []

        def shut_down() -> None:
            ex = self.executors.get(executor_id)
            if ex is not None and not ex.inflight and not ex.zombies:
                ex.draining = True
                retired.append(self._send(ex, m.Shutdown()))

        self._call(shut_down)
        return bool(retired and retired[0])

    def _send_team(self, ex: ExecutorState, msg: m.Team) -> bool:
        ex.draining = True  # nothing is dispatched to it until it has joined (cluster.dataplane.host_teams)
        return self._send(ex, msg)

    def _finished(self, ex: ExecutorState, msg: m.Done | m.Failed) -> None:
        for listener in self.completion_listeners:
            listener(msg)
        job = ex.inflight.pop(msg.dispatch_id, None)
        if job is None:
            if msg.dispatch_id in ex.zombies:  # it finished after all; its result is not wanted
                ex.zombies.discard(msg.dispatch_id)
                ex.draining = bool(ex.zombies) or self.teams.waiting(ex.id)
            if isinstance(msg, m.Done):
                self._discard(msg.outputs)
            return
        ex.completed += 1
        self.scheduler.complete(job.inv, msg.measured_s)  # a batch part: its share of the run
        if isinstance(msg, m.Done):
            ex.pulls.update(shm=msg.shm_pulls, tcp=msg.tcp_pulls, tcp_bytes=msg.tcp_bytes)
            ex.device_peak = max(ex.device_peak, msg.device_peak)
            self._loads.observe_transfer(msg.tcp_bytes, msg.tcp_s)
        if isinstance(msg, m.Done) and msg.load_s > 0 and job.inv.model_key:
            # The latest load is the estimate: every executor loads a model from the same files, and
            # the latest measurement reflects the host as it is now (page cache, contention).
            self._loads.measured[job.inv.model_key] = msg.load_s
        self._untrack(job)
        if isinstance(msg, m.Done):
            if job.batched and msg.batch == 1:
                self.counters["batch_fallbacks"] += 1  # the merged run failed; this part ran alone
            ex.memory_used, ex.cached_models = msg.memory_used, set(msg.cached_models)
            self.costs.observe(job.inv.fn, job.inv.model_key, job.shapes, msg.measured_s)
            self.scaling.observe(job.inv.model_key, msg.measured_s)
            self.counters["completed"] += 1
            if job.future.done():
                self._discard(msg.outputs)
            else:
                job.future.set_result(
                    Result(
                        msg.outputs, msg.nulls, ex.id, msg.measured_s, msg.wall_s, job.attempts, msg.batch, msg.batch_s
                    )
                )
        elif msg.lost_input:
            # not the ModelFn's fault and not the request's end: the caller re-sends the input
            self.counters["lost_inputs"] += 1
            self._set_exception(job, InputLost(f"an input of {job.inv.fn!r} was lost: {msg.error}"))
        else:
            self.counters["failed"] += 1
            err = ModelFnError(f"ModelFn {job.inv.fn!r} failed on executor {ex.id}: {msg.error}", msg.traceback)
            self._set_exception(job, err)
            self._fail_request(
                job.inv.request, RequestCancelled(f"request {job.inv.request}: another invocation failed: {msg.error}")
            )

    def _discard(self, outputs: dict[str, m.TensorMeta]) -> None:
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

    def _untrack(self, job: Job) -> None:
        jobs = self._jobs_by_request.get(job.inv.request)
        if jobs is not None:
            jobs.discard(job)
            if not jobs:
                del self._jobs_by_request[job.inv.request]

    def _set_exception(self, job: Job, err: Exception) -> None:
        if not job.future.done():
            job.future.set_exception(err)

    def _fail_request(self, request: str, err: ClusterError) -> None:
        jobs = self._jobs_by_request.pop(request, set())
        queued = [j for j in jobs if j.executor is None]
        self.dispatcher.cancel(j.inv for j in queued)  # parked or forming ones are dropped at the next dispatch
        for j in jobs:
            self._set_exception(j, err)
        # running ones stay tracked until they finish, so a later cancel still finds them
        running = {j for j in jobs if j.executor is not None}
        if running:
            self._jobs_by_request[request] = running

    def _send_preloads(self) -> None:
        """Tell each executor the models to preload when the dispatcher's order has changed for it."""
        order = [k for k in self.dispatcher.preload_order() if k in self._recipes]
        if not order:
            return
        wanted = None
        for ex in list(self.executors.values()):
            if ex.draining or ex.preload_sent == order:
                continue
            if wanted is None:
                wanted = [
                    m.PreloadModel(fn, key, payload, self.costs.measured(fn, key) or 0.0)
                    for key in order
                    for fn, payload in [self._recipes[key]]
                ]
            if self._send(ex, m.Preload(wanted)):
                ex.preload_sent = order

    def _check_executors(self) -> None:
        self._send_preloads()
        now = time.monotonic()
        for ex in list(self.executors.values()):
            if now - ex.last_seen > self.lost_after_s:
                self._lose(ex, self._exit_cause(ex) or f"no heartbeat for {now - ex.last_seen:.1f}s")
                continue
            for did, job in list(ex.inflight.items()):
                limit = job.dispatch.deadline_s
                if now - job.dispatched_at > limit:
                    del ex.inflight[did]
                    ex.zombies.add(did)
                    ex.draining = True
                    self.counters["deadline_exceeded"] += 1
                    self.scheduler.complete(job.inv, now - job.dispatched_at)
                    self._untrack(job)
                    err = DeadlineExceeded(
                        f"ModelFn {job.inv.fn!r} of request {job.inv.request} ran past its "
                        f"deadline of {limit:g}s on executor {ex.id}"
                    )
                    self._set_exception(job, err)
                    self._fail_request(job.inv.request, RequestCancelled(f"request {job.inv.request}: {err}"))
                    self._send(ex, m.Abort(did, f"deadline of {limit:g}s exceeded"))

    def _lose(self, ex: ExecutorState, why: str, expected: bool = False) -> None:
        if self.executors.get(ex.id) is not ex:
            return
        log.log(
            logging.INFO if expected else logging.WARNING,
            "executor %s lost (%s); re-running %d invocation(s)",
            ex.id,
            why,
            len(ex.inflight),
        )
        del self.executors[ex.id]
        self._by_identity.pop(ex.identity, None)
        ex.draining = True  # a dispatch being decided (a send to it just failed) skips it
        self.counters["executors_lost"] += 1
        for job in ex.inflight.values():
            job.executor = None
            if job.future.done():  # cancelled meanwhile: only settle the accounting
                self.scheduler.complete(job.inv, None)
            elif job.attempts >= self.max_attempts:
                self.scheduler.complete(job.inv, None)
                self._untrack(job)
                self._set_exception(
                    job,
                    ExecutorLost(
                        f"ModelFn {job.inv.fn!r} lost its executor {job.attempts} times (last: {ex.id}, {why})"
                    ),
                )
            else:
                self.counters["reruns"] += 1
                self.dispatcher.requeue(job.inv)
        ex.inflight.clear()
        self.teams.lose(ex.id)  # its host's team forms again without it
        if self._same_host(ex) and not _alive(ex.pid):
            # its arena is gone with it; a live one (slow heartbeats) may register again and keep it
            segments.unlink_prefix(ex.shm_prefix)
        for watch in self._lost_watchers:
            watch(ex.shm_prefix)

    def _same_host(self, ex: ExecutorState) -> bool:
        return ex.host == self.host and (not ex.host_id or ex.host_id == self.host_id)

    def _shutdown_executors(self) -> None:
        for ex in list(self.executors.values()):
            self._send(ex, m.Shutdown(head_stopping=True))

    # dispatching (cluster.scheduling.dispatcher decides; the head sends) -------------------------------------------
    def _dispatch(self) -> None:
        d = self.dispatcher
        if not d.pending():
            return
        waits = d.waits_started
        for a in d.schedule(time.monotonic(), self.executors.values()):
            self._send_to(a.executor, [inv.payload for inv in a.invocations])
        if d.waits_started != waits:
            self._resleep()  # a batch window opened or an invocation parked: the head thread wakes for it

    def _send_to(self, ex: ExecutorState, live: list[Job]) -> None:
        """Send the jobs to `ex`: one Dispatch, or one BatchDispatch for several."""
        now = time.monotonic()
        for job in live:
            job.attempts += 1
            job.dispatch.dispatch_id = next(self._ids)
            job.dispatched_at = now
            job.executor = ex
            job.batched = len(live) > 1
            ex.inflight[job.dispatch.dispatch_id] = job
        self._decision_times.append(now)
        if len(live) == 1:
            self._send(ex, live[0].dispatch)
            return
        self._send(ex, m.BatchDispatch([job.dispatch for job in live]))
