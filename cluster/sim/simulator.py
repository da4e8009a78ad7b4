"""The discrete-event simulator: the real scheduler and placement over modelled GPU executors.

Systems (`SimConfig.system`):
  ours      workflows run as DAGs of ModelFn invocations dispatched by cluster.scheduling.dispatcher, the
            head's own dispatch policy on the simulated clock: cluster.scheduling.tenant_scheduler (vTime, FIFO, SJF
            or VTC), placement with the per-model scaling targets (cluster.scheduling.scaling), waiting for a
            busy warm executor (cluster.scheduling.warm_wait) and, with `max_batch` above 1, same-model
            invocations merged into one run (a batch of n runs 1 + (n-1) x `batch_marginal` times
            as long as one); each executor keeps a layer cache (LayerLRU) and loads with prefix
            pipelining (cluster.weights.prefix, Eq. 1).
  mcache    monolithic workflow functions, whole models cached in idle memory (paper §8.1)
  wcache    monolithic workflow functions, whole workflows cached in idle memory
  nocache   monolithic workflow functions, nothing cached between requests
Monolithic requests go through the same dispatcher (FIFO by default), placed preferring a GPU
holding the workflow (WCache) or the most of its model bytes (MCache). With `startup_s` above 0 they
run as the paper deploys them (§2.3, §8.1): serverless function instances, one workflow each, that the
platform starts on a GPU when no live instance of the workflow is there (paying `startup_s` before the
weight loads) and scales in after `keepalive_s` idle; a WCache instance's cached workflow goes with it,
and evicting that workflow ends the instance ("a GPU function is terminated when the cached workflow is
evicted"), while MCache's cached models outlive the instances that loaded them. With `startup_s` 0 an instance costs
nothing and the baselines are the generous shared pool.
With `preload`, Comfy Cluster's executors fill idle memory with the first L_e layers of the models the
workload has asked for (§5.1), most requested first, whenever they fall idle; never by evicting. Which
models is the dispatcher's `preload_order`, the one the head sends its real executors.

A scenario (`SimHooks`, e.g. cluster/sim/cascade_scenario.py) hears of arrivals and runs, and decides
whether a node whose inputs are ready runs at all (a branch not taken is skipped), so a workflow can
be conditional; with `shed_factor`, the dispatcher drops invocations whose request can no longer finish
within that multiple of its SLO (load shedding) and the request ends unanswered.

Time advances by events only (arrivals, completions, a batch window closing, and a parked invocation
having waited its load time: the dispatcher's wake_at, as the head's sleep); an executor runs
one invocation, or one batch, at a time.
The control-plane CPU time (scheduling, placement, cost model, DAG bookkeeping) is measured with
the thread's CPU clock and reported against the simulated GPU time it ordered.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from cluster.scheduling.costs import CostModel
from cluster.scheduling.dispatcher import Dispatcher
from cluster.scheduling.interface import Assignment
from cluster.scheduling.policies import make_scheduler
from cluster.scheduling.scaling import ScalingController
from cluster.scheduling.tenant_scheduler import Invocation
from cluster.scheduling.warm_wait import WarmWaitPolicy
from cluster.sim.caches import LayerLRU, ModelLRU, WorkflowLRU
from cluster.sim.gpu_profiles import GIB, REFERENCE, GPUSpec, ModelProfile
from cluster.sim.load_costs import WHOLE_WORKFLOW, SimLoadCosts
from cluster.sim.results import Completion, RequestRecord, SimResult
from cluster.sim.traces import TraceRequest
from cluster.sim.workflows import Workflow, compute_times
from cluster.weights.prefix import prefix_length

SYSTEMS = ("ours", "mcache", "wcache", "nocache")


@dataclass
class SimConfig:
    gpus: int = 32
    gpu: GPUSpec = REFERENCE
    system: str = "ours"
    policy: str = "vtime"  # scheduler policy (cluster.scheduling.policies.POLICIES)
    delta: float = 10.0  # fairness slack, seconds of vTime
    slo_scale: float = 3.0  # deadline = slo_scale x solo latency of the workflow
    slo_s: float | None = None  # or this many seconds after arrival for every workflow
    shed_factor: float | None = None  # shed what cannot finish within this x the SLO (None: never)
    prefix_loading: bool = True  # ours: run on resident first layers while the rest stream in
    activation_frac: float = 0.076  # runtime state per running model (Flux: 7.6 % of weights)
    horizon_s: float | None = None  # stop there (backlog experiments); None: drain every request
    warmup_s: float = 0.0  # leave requests arriving earlier out of the figures
    record_service: bool = False  # keep every completion (fairness plots)
    wait_for_warm: bool = True  # park an invocation for a busy warm executor when sooner than a load
    max_batch: int = 1  # ours: samples per batched run (1: no batching, as the head's default)
    batch_window_s: float = 0.0  # how long a batch that is not full waits for more
    # A batch of n runs 1 + (n-1) x this as long as one invocation: `comfy-cluster bench batching`
    # measured 1.31x steps/s at n=4 on one CPU executor, i.e. about 0.68 per extra sample.
    batch_marginal: float = 0.68
    tenant_weights: dict[str, float] = field(default_factory=dict)
    startup_s: float = 0.0  # monolithic baselines: start-up of a function instance (0: a pool)
    keepalive_s: float = 60.0  # ... and how long an idle NoCache/MCache instance is kept
    preload: bool = False  # ours: first L_e layers of requested models into idle memory


class SimExecutor:
    """A modelled GPU, as cluster.scheduling.interface.ExecutorView."""

    __slots__ = ("id", "cache", "busy", "busy_until", "cached_models", "running_bytes", "instances")
    draining = False  # a modelled GPU never aborts a run

    def __init__(self, idx: int, cache) -> None:
        self.id = f"gpu{idx:04d}"
        self.cache = cache
        self.busy = False
        self.busy_until = 0.0
        self.cached_models: set[str] = set()
        self.running_bytes = 0
        self.instances: dict[str, float] = {}  # function instances: workflow -> when it was last busy

    @property
    def load(self) -> int:
        return int(self.busy)

    def free_in(self, now: float) -> float:
        return max(0.0, self.busy_until - now)


class SimRequest:
    """One request of the trace as it runs: which of its workflow's nodes wait for inputs, where each ran."""

    __slots__ = (
        "idx",
        "trace",
        "wf",
        "deadline",
        "pending",
        "ran_on",
        "left",
        "load_s",
        "compute_s",
        "transfer_s",
        "finish",
        "shed",
    )

    def __init__(self, idx: int, tr: TraceRequest, wf: Workflow, deadline: float) -> None:
        self.idx, self.trace, self.wf, self.deadline = idx, tr, wf, deadline
        self.shed = False  # the dispatcher dropped one of its invocations
        self.pending = [len(n.deps) for n in wf.nodes]
        self.ran_on: list[str | None] = [None] * len(wf.nodes)
        self.left = len(wf.nodes)
        self.load_s = self.compute_s = self.transfer_s = 0.0
        self.finish: float | None = None


class SimStep(NamedTuple):
    """The simulator's payload of an Invocation: the request, and which node of its workflow this call
    is (WHOLE_WORKFLOW for the monolithic baselines, which run a workflow as one function)."""

    request: SimRequest
    node: int


SimInvocation = Invocation[SimStep]


class SimHooks(Protocol):
    """What a scenario adds to the simulated workflows (the cascade: cluster/sim/cascade_scenario.py)."""

    def arrived(self, req: SimRequest) -> None:
        """`req` arrived; its root nodes are pushed next."""

    def runs(self, req: SimRequest, node: int) -> bool:
        """Whether `node`, whose inputs are ready, runs (False: skipped, a branch not taken)."""

    def ran(self, invs: Sequence[SimInvocation], seconds: float) -> None:
        """A run of `invs` (one call, a batch when several) ended after `seconds`, before their
        successors are considered."""

    def shed(self, inv: SimInvocation) -> None:
        """The dispatcher dropped `inv` (load shedding): its request ends unanswered."""


class Simulator:
    def __init__(
        self,
        cfg: SimConfig,
        workflows: Sequence[Workflow],
        profiles: dict[str, ModelProfile],
        hooks: SimHooks | None = None,
    ) -> None:
        if cfg.system not in SYSTEMS:
            raise ValueError(f"unknown system {cfg.system!r}; choose one of {SYSTEMS}")
        self.cfg = cfg
        self.hooks = hooks
        self.workflows = {w.name: w for w in workflows}
        self.profiles = profiles
        self.compute = compute_times(profiles, cfg.gpu)
        self.load = {k: cfg.gpu.load_s(p) for k, p in profiles.items()}
        self.remaining = {w.name: w.remaining(self.compute) for w in workflows}
        self.solo = {w.name: w.solo_s(self.compute) for w in workflows}
        self.prefix = {
            k: prefix_length(p.layers, self.load[k] / p.layers, self.compute[k] / p.layers) for k, p in profiles.items()
        }
        self.now = 0.0
        # monolithic baselines as function instances: the platform starts another instance for a request
        # rather than hold it for a busy one, so it has no warm wait
        self.functions = cfg.system != "ours" and cfg.startup_s > 0
        self.scheduler = make_scheduler(cfg.policy, cfg.delta, clock=lambda: self.now)
        for tenant, weight in cfg.tenant_weights.items():
            self.scheduler.set_weight(tenant, weight)
        self.costs = CostModel()
        # ours: the head's per-model scaling controller on the simulated clock (placement reads its targets)
        self.scaling = ScalingController(clock=lambda: self.now) if cfg.system == "ours" else None
        self._profile_costs(workflows)
        # weights may fill the device except the runtime state of the largest model that runs
        largest = max(profiles[m].nbytes for w in workflows for m in w.models)
        capacity = int(cfg.gpu.memory_gib * GIB) - int(cfg.activation_frac * largest)
        self.executors = [SimExecutor(i, self._make_cache(capacity)) for i in range(cfg.gpus)]
        self.load_costs = SimLoadCosts(cfg, profiles, self.compute, self.load, self.functions)
        # the simulator is the dispatcher's shell, and its load costs the simulated GPUs'
        self.dispatcher = Dispatcher(
            self.scheduler,
            self.load_costs,
            max_batch=cfg.max_batch,
            batch_window_s=cfg.batch_window_s,
            warm_wait=WarmWaitPolicy(enabled=cfg.wait_for_warm and not self.functions),
            scaling=self.scaling,
            shed_run_s=self.load_costs.run_s if cfg.shed_factor is not None else None,
        )
        self._wake_at: float | None = None  # the pending batch-window event
        self._events: list = []
        self._seq = 0
        self._inv_ids = 0
        self.cp_cpu_s = 0.0
        self._exec_model_s = 0.0  # CPU time of the executor model inside a handler (not control plane)
        self.gpu_busy_s = 0.0
        self.completions: list[Completion] = []
        self.vtimes: list[tuple[float, dict[str, float]]] = []  # scheduler vTime after each completion
        self.loads = {"hit": 0, "partial": 0, "miss": 0}
        if self.functions:
            self.loads["instance_starts"] = 0
        self._mem_used = 0
        self.mem_integral = 0.0
        self._mem_t = 0.0
        self.inflight = 0
        self.max_inflight = 0

    # -- setup ----------------------------------------------------------------------------------

    def _make_cache(self, capacity: int):
        system = self.cfg.system
        if system == "ours":
            return LayerLRU(capacity, self.profiles)
        if system == "mcache":
            return ModelLRU(capacity, self.profiles)
        if system == "wcache":
            return WorkflowLRU(capacity)
        return None

    def _profile_costs(self, workflows: Sequence[Workflow]) -> None:
        """One profiling pass per ModelFn, as a deployment measures before taking traffic."""
        for w in workflows:
            for n in w.nodes:
                if self.costs.samples(n.fn, n.model) == 0:
                    self.costs.observe(n.fn, n.model, (), self.compute[n.model])
            if self.costs.samples("workflow", w.name) == 0:
                self.costs.observe("workflow", w.name, (), sum(self.compute[n.model] for n in w.nodes))

    # -- event loop -----------------------------------------------------------------------------

    def _at(self, t: float, kind: int, obj) -> None:
        self._seq += 1
        heapq.heappush(self._events, (t, self._seq, kind, obj))

    def run(self, trace: Sequence[TraceRequest]) -> SimResult:
        unknown = {r.workflow for r in trace} - set(self.workflows)
        if unknown:
            raise ValueError(f"trace names unknown workflows {sorted(unknown)}")
        requests: list[SimRequest] = []
        for i, tr in enumerate(trace):
            wf = self.workflows[tr.workflow]
            req = SimRequest(i, tr, wf, tr.time + self.slo(wf))
            requests.append(req)
            self._at(tr.time, 0, req)
        horizon = self.cfg.horizon_s
        clock = time.thread_time
        for ex in self.executors:
            self._preload(ex)
        while self._events:
            t, _, kind, obj = heapq.heappop(self._events)
            if horizon is not None and t > horizon:
                break
            self.now = t
            c0 = clock()
            if kind == 0:
                self._arrive(obj)
            elif kind == 1:
                self._complete(*obj)
            elif kind == 3:
                self._scale_in(*obj)
            else:
                self._wake_at = None  # a batch window closed, or a parked invocation is due
            self._dispatch()
            self.cp_cpu_s += clock() - c0 - self._exec_model_s
            self._exec_model_s = 0.0
        end = self.now if horizon is None else horizon
        self._mem_account(end, 0)
        return result_of(self, requests, end)

    def slo(self, wf: Workflow) -> float:
        return self.cfg.slo_s if self.cfg.slo_s is not None else self.cfg.slo_scale * self.solo[wf.name]

    # -- control plane --------------------------------------------------------------------------

    def _arrive(self, req: SimRequest) -> None:
        for m in req.wf.models:
            self.dispatcher.expect(m)  # what preloading ranks by, as the head's submissions
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        if self.hooks is not None:
            self.hooks.arrived(req)
        if self.cfg.system == "ours":
            for i in req.wf.roots:
                self._ready(req, i)
        else:
            self._push_workflow(req)

    def _ready(self, req: SimRequest, i: int) -> None:
        """Node `i`'s inputs are ready: push it, or skip it (and go on to its successors) when the
        scenario says this branch is not taken."""
        if self.hooks is None or self.hooks.runs(req, i):
            self._push(req, i)
        else:
            self._node_done(req, i)

    def _node_done(self, req: SimRequest, i: int) -> None:
        """Node `i` ran or was skipped: the request finishes with its last node, else successors whose
        inputs are now all ready become ready."""
        req.left -= 1
        if req.left == 0:
            req.finish = self.now
            self.inflight -= 1
            return
        for s in req.wf.succ[i]:
            req.pending[s] -= 1
            if req.pending[s] == 0:
                self._ready(req, s)

    def _push(self, req: SimRequest, i: int) -> None:
        node = req.wf.nodes[i]
        inputs: dict[str, int] = {}
        for d in node.deps:
            ex = req.ran_on[d]
            inputs[ex] = inputs.get(ex, 0) + req.wf.nodes[d].out_bytes
        self._inv_ids += 1
        # same ModelFn on the same model: one run (the modelled nodes carry no params to tell apart),
        # when its model's cap (`max_batch`, or one set on the dispatcher) allows more than one
        key = f"{node.fn}|{node.model}" if self.dispatcher.batch_size(node.model) > 1 else None
        self.dispatcher.add(
            Invocation(
                self._inv_ids,
                req.trace.tenant,
                str(req.idx),
                node.fn,
                node.model,
                self.costs.estimate(node.fn, node.model),
                self.remaining[req.wf.name][i],
                input_bytes=inputs,
                payload=SimStep(req, i),
                batch_key=key,
                deadline=self._shed_deadline(req),
            )
        )

    def _shed_deadline(self, req: SimRequest) -> float | None:
        factor = self.cfg.shed_factor
        return None if factor is None else req.trace.time + factor * self.slo(req.wf)

    def _push_workflow(self, req: SimRequest) -> None:
        self._inv_ids += 1
        wf = req.wf
        self.dispatcher.add(
            Invocation(
                self._inv_ids,
                req.trace.tenant,
                str(req.idx),
                "workflow",
                wf.name,
                self.costs.estimate("workflow", wf.name),
                0.0,
                payload=SimStep(req, WHOLE_WORKFLOW),
                deadline=self._shed_deadline(req),
            )
        )

    def _dispatch(self) -> None:
        d = self.dispatcher
        if not d.pending():
            return
        for a in d.schedule(self.now, self.executors):
            self._start(a)
        for inv in d.take_shed():
            self._shed(inv)
        # the head sleeps until DispatchPolicy.wake_at: a batch window closes, or a parked invocation
        # has waited its load time and may take a cold executor; without that event it would wait for
        # the next arrival or completion (seconds at low rates), which the head never does
        due = d.wake_at(self.now)
        if due is not None and due > self.now and (self._wake_at is None or due < self._wake_at):
            self._wake_at = due
            self._at(due, 2, None)

    def _shed(self, inv: SimInvocation) -> None:
        """The request of a shed invocation ends unanswered. Only chains shed cleanly: a sibling branch
        already queued still runs, but nothing new of the request starts."""
        req = inv.payload.request
        if not req.shed:
            req.shed = True
            self.inflight -= 1
        if self.hooks is not None:
            self.hooks.shed(inv)

    def _start(self, a: Assignment) -> None:
        ex, invs = a.executor, a.invocations
        ex.busy = True
        ex.busy_until = self.now + max(inv.estimate for inv in invs)  # as the head's free_in counts a batch
        c0 = time.thread_time()
        duration = self._execute(ex, invs, a.load_s)
        self._exec_model_s += time.thread_time() - c0
        self._at(self.now + duration, 1, (ex, invs, duration))

    def _scale_in(self, ex: SimExecutor, workflow: str, last_busy: float) -> None:
        """The platform ends an instance idle for `keepalive_s`: a WCache instance takes its cached workflow
        with it; MCache's cached models stay for the next instance; NoCache held nothing."""
        if ex.instances.get(workflow) != last_busy:
            return  # it ran again since (a later event decides), or it was evicted
        del ex.instances[workflow]
        if self.cfg.system == "wcache":
            self._mem_account(self.now, -ex.cache.release(workflow))
        ex.cached_models.discard(workflow)

    def _complete(self, ex: SimExecutor, invs: tuple[SimInvocation, ...], duration: float) -> None:
        """A run ended: the executor is free, and each part is charged its share (the head's
        cluster.scheduling.batching.charge_shares, with one sample per modelled invocation)."""
        self._mem_account(self.now, -ex.running_bytes)
        ex.running_bytes = 0
        ex.busy = False
        if self.hooks is not None:
            self.hooks.ran(invs, duration)
        share = duration / len(invs)
        for inv in invs:
            self._finish(ex, inv, share)
        if not ex.busy:
            self._preload(ex)

    def _preload(self, ex: SimExecutor) -> None:
        """An idle executor of ours takes the first L_e layers of the models asked for most (at the start,
        of every deployed model) into free memory, in the background: no GPU time, no eviction."""
        if not self.cfg.preload or self.cfg.system != "ours":
            return
        # the head's decision (cluster.scheduling.dispatcher.preload_order), so the two cannot drift
        wanted = self.dispatcher.preload_order(m for w in self.workflows.values() for m in w.models)
        used = ex.cache.used
        for m in wanted:
            ex.cache.preload(m, self.prefix[m])
        if ex.cache.used != used:
            self._mem_account(self.now, ex.cache.used - used)
            ex.cached_models = {m for m, r in ex.cache.resident.items() if r >= self.prefix[m]}

    def _finish(self, ex: SimExecutor, inv: SimInvocation, measured: float) -> None:
        req, i = inv.payload
        self.scheduler.complete(inv, measured)
        self.costs.observe(inv.fn, inv.model_key, (), measured)
        if self.scaling is not None:
            self.scaling.observe(inv.model_key, measured)
        self.gpu_busy_s += measured
        if self.cfg.record_service:
            self.completions.append(Completion(self.now, req.trace.tenant, measured))
            self.vtimes.append((self.now, {t.name: t.vtime for t in self.scheduler.tenants.values()}))
        if req.shed:
            return
        if i == WHOLE_WORKFLOW:
            req.left = 0
            req.finish = self.now
            self.inflight -= 1
        else:
            req.ran_on[i] = ex.id
            self._node_done(req, i)

    # -- executor model -------------------------------------------------------------------------

    def _execute(self, ex: SimExecutor, invs: tuple[SimInvocation, ...], load: float) -> float:
        req, i = invs[0].payload
        if i != WHOLE_WORKFLOW:
            return self._execute_modelfn(ex, invs, load)
        return self._execute_workflow(ex, req, load)

    def _execute_modelfn(self, ex: SimExecutor, invs: tuple[SimInvocation, ...], load: float) -> float:
        """One run of a ModelFn for one invocation or a batch: the weights are brought in once, and
        every request in the batch waits for the whole run."""
        p = self.profiles[invs[0].model_key]
        n = len(invs)
        comp = self.load_costs.run_s(p.name, n)
        run = comp + load
        used = ex.cache.used
        before = ex.cache.acquire(p.name)
        self._mem_account(self.now, ex.cache.used - used)
        self.loads["hit" if before == p.layers else "miss" if before == 0 else "partial"] += 1
        # "holds the weights" for placement: enough first layers resident to hide the rest's loading
        ex.cached_models = {m for m, r in ex.cache.resident.items() if r >= self.prefix[m]}
        remote = sum(b for inv in invs for e, b in inv.input_bytes.items() if e != ex.id)
        transfer = self.cfg.gpu.transfer_s(remote)
        for inv in invs:
            req = inv.payload.request
            req.load_s += run - comp
            req.compute_s += comp
            req.transfer_s += transfer
        self._running(ex, int(self.cfg.activation_frac * p.nbytes * n))
        return run + transfer

    def _execute_workflow(self, ex: SimExecutor, req: SimRequest, load: float) -> float:
        wf = req.wf
        models = wf.models
        wf_bytes = sum(self.profiles[m].nbytes for m in models)
        system = self.cfg.system
        used = ex.cache.used if ex.cache is not None else 0
        comp = sum(self.compute[n.model] for n in wf.nodes)  # one process runs the DAG in order
        if self.functions and not self.load_costs.instance_alive(ex, wf.name):
            self.loads["instance_starts"] += 1
        if system == "mcache":
            missing = ex.cache.acquire(models)
            ex.cached_models = {
                w.name for w in self.workflows.values() if all(m in ex.cache.resident for m in w.models)
            }
        elif system == "wcache":
            missing = [] if ex.cache.acquire(wf.name, wf_bytes) else models
            ex.cached_models = set(ex.cache.resident)
        else:
            missing = models
        if self.functions:
            end = self.now + load + comp
            if system == "wcache":  # an evicted workflow's instance was terminated with it
                ex.instances = {w: t for w, t in ex.instances.items() if w in ex.cache.resident}
            ex.instances[wf.name] = end
            self._at(end + self.cfg.keepalive_s, 3, (ex, wf.name, end))
            warm = set(ex.instances) if system == "nocache" else ex.cached_models  # nocache: warm = live
            ex.cached_models = {w for w in warm if w in ex.instances} | {wf.name}
        if ex.cache is not None:
            self._mem_account(self.now, ex.cache.used - used)
        for m in models:
            self.loads["miss" if m in missing else "hit"] += 1
        req.load_s += load
        req.compute_s += comp
        act = int(self.cfg.activation_frac * max(self.profiles[m].nbytes for m in models))
        # NoCache holds the weights only while it runs; the others hold them in their cache
        self._running(ex, act + (wf_bytes if system == "nocache" else 0))
        return load + comp

    def _running(self, ex: SimExecutor, nbytes: int) -> None:
        ex.running_bytes = nbytes
        self._mem_account(self.now, nbytes)

    def _mem_account(self, t: float, delta: int) -> None:
        self.mem_integral += self._mem_used * (t - self._mem_t)
        self._mem_t = t
        self._mem_used += delta


def result_of(sim: Simulator, requests: list[SimRequest], end: float) -> SimResult:
    """The run's requests, memory utilisation, loads and decisions, as `SimResult`."""
    records = [
        RequestRecord(
            r.trace.time,
            r.trace.tenant,
            r.wf.name,
            r.finish,
            r.deadline,
            sim.solo[r.wf.name],
            r.load_s,
            r.compute_s,
            r.transfer_s,
        )
        for r in requests
    ]
    capacity = sim.cfg.gpus * sim.cfg.gpu.memory_gib * GIB
    return SimResult(
        system=sim.cfg.system,
        policy=sim.cfg.policy,
        gpus=sim.cfg.gpus,
        requests=records,
        end_s=end,
        memory_utilisation=sim.mem_integral / (capacity * end) if end > 0 else 0.0,
        loads=dict(sim.loads),
        cp_cpu_s=sim.cp_cpu_s,
        gpu_busy_s=sim.gpu_busy_s,
        decisions=sim.scheduler.decisions,
        max_inflight=sim.max_inflight,
        completions=sim.completions,
        vtimes=sim.vtimes,
        warmup_s=sim.cfg.warmup_s,
    )


def simulate(
    cfg: SimConfig, trace: Sequence[TraceRequest], workflows: Sequence[Workflow], profiles: dict[str, ModelProfile]
) -> SimResult:
    return Simulator(cfg, workflows, profiles).run(trace)
