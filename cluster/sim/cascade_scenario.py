"""DiffServe's cascade as a scenario of the simulator: a light model answers, a discriminator scores
its image, and the heavy model re-runs the queries scored below the threshold, on simulated executors
with DiffServe's profiled A100 latencies, dispatched by cluster.scheduling.dispatcher like any simulated workflow.

- The workflow: `generate` on the light model, `discriminate`, then `generate` on the heavy model,
  which runs only when the query's confidence (drawn from the cascade's f(t)) is below the threshold in
  force when the discriminator is done. All-heavy runs the heavy stage alone. One invocation is a
  whole query's generation: DiffServe profiles queries per batch size, and a batch runs as long as the
  smallest profiled size holding it (padded, cluster/cascade/profiles.py).
- Decisions reach the dispatcher as they reach the head: the stages' batch caps
  (cascade.head_hook.apply_batch_sizes; the discriminator scores a light batch, so it gets the light
  cap), and the executors per stage as the scaling controller's replica floors. Executors are one
  pool: both models fit in every executor's memory, so each takes whichever stage is next (FIFO).
- Load shedding is the dispatcher's: a query that cannot finish within 1.5 x SLO is dropped.
- Policies: all-light, all-heavy, static (one allocation solved for a demand known in advance) and
  adaptive (the real CascadeController with its MILP on the simulated clock: it measures every 1 s
  and re-solves every 5 s, or within a tick when its decision stops fitting).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from cluster.cascade.allocation import Allocation, Problem, allocate
from cluster.cascade.controller import CascadeController
from cluster.cascade.head_hook import apply_batch_sizes
from cluster.cascade.profiles import DIFFSERVE_MS, DISCRIMINATOR_MS, reference_profile
from cluster.cascade.spec import CascadeSpec, Policy, StageSpec
from cluster.sim.gpu_profiles import GPUSpec, ModelProfile, h800_profiles
from cluster.sim.simulator import SimConfig, SimInvocation, SimRequest, Simulator
from cluster.sim.traces import TraceRequest
from cluster.sim.workflows import SimNode, Workflow

POLICIES = ("light", "heavy", "static", "adaptive")
DISCRIMINATOR = "efficientnet"
CASCADE_WF, HEAVY_WF = "cascade", "heavy-only"
HEAVY_NODE = 2  # of the cascade workflow: light 0, discriminator 1, heavy 2
# DiffServe's latencies are A100 measurements: speed 1 so they are taken as they are
A100 = GPUSpec("A100-80G", 80.0, 6.4, 60.0, 1.0)
IMAGE_BYTES = 512 * 512 * 3


@dataclass(frozen=True)
class Cascade:
    """The cascade simulated (its models, the discriminator's f(t), FID by the light model's share)
    and the cluster it runs on."""

    deferred: tuple[tuple[float, float], ...]  # (t, f(t) = P(confidence < t)), ascending
    fid: tuple[float, ...]  # FID at light shares evenly spaced over [0, 1]
    light: str = "sdturbo"
    heavy: str = "sdv15"
    executors: int = 16
    slo_s: float = 5.0
    batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16)
    shed_factor: float | None = 1.5  # shed what cannot finish within this x SLO (None: never)

    def modelled_fid(self, light_share: float) -> float:
        return float(np.interp(light_share, np.linspace(0, 1, len(self.fid)), self.fid))

    def draw_confidence(self, rng: random.Random) -> float:
        """Inverse-CDF sample: P(confidence < t) = f(t)."""
        ts, fs = zip(*self.deferred)
        return float(np.interp(rng.random(), fs, ts))

    def allocation_for(self, demand: float) -> Allocation:
        """DiffServe's allocation for a known demand (queries/s), from the profiled latencies."""
        grid = tuple(round(0.01 * i, 2) for i in range(101))
        f = tuple(float(np.interp(t, *zip(*self.deferred))) for t in grid)
        light = reference_profile(self.light, self.batch_sizes, DISCRIMINATOR_MS / 1e3)
        return allocate(
            Problem(light, reference_profile(self.heavy, self.batch_sizes), grid, f, demand, self.slo_s, self.executors)
        )


def peak_demand(arrivals: Sequence[float]) -> float:
    """What DiffServe-Static provisions for: 1.2 x the busiest second of the trace."""
    return 1.2 * max(np.histogram(arrivals, bins=int(max(arrivals)) + 1)[0].max(), 1)


def profiles(c: Cascade) -> dict[str, ModelProfile]:
    """The stages' models: DiffServe's batch latencies on SD1.5's weights and load times (an SD UNet;
    SD-Turbo's is the same size), and a discriminator that costs the same per batch of any size."""
    sd = h800_profiles()["StableDiffusion15"]
    out = {
        m: replace(
            sd,
            name=m,
            exec_s=DIFFSERVE_MS[m][1] / 1e3,
            batch_s=tuple((b, ms / 1e3) for b, ms in sorted(DIFFSERVE_MS[m].items())),
        )
        for m in (c.light, c.heavy)
    }
    per_batch = DISCRIMINATOR_MS / 1e3
    out[DISCRIMINATOR] = ModelProfile(DISCRIMINATOR, 0.01, 0.05, 0.02, per_batch, 12, ((1 << 30, per_batch),))
    return out


def workflows(c: Cascade) -> list[Workflow]:
    return [
        Workflow(
            CASCADE_WF,
            [
                SimNode("generate", c.light, (), IMAGE_BYTES),
                SimNode("discriminate", DISCRIMINATOR, (0,), 8),
                SimNode("generate", c.heavy, (1,), IMAGE_BYTES),
            ],
        ),
        Workflow(HEAVY_WF, [SimNode("generate", c.heavy, (), IMAGE_BYTES)]),
    ]


@dataclass
class Query:
    arrival: float
    confidence: float
    finish: float | None = None
    answered: str = ""  # light | heavy; "" while unanswered
    dropped: bool = False


@dataclass
class CascadeRun:
    """One policy on one trace: a SimHooks for the simulator, and the queries' outcomes after it ran."""

    cascade: Cascade
    policy: str
    arrivals: Sequence[float]
    plan: Allocation
    seed: int = 0
    queries: list[Query] = field(default_factory=list)
    thresholds: list[tuple[float, float]] = field(default_factory=list)  # adaptive: (time, threshold)
    threshold: float = field(init=False, default=0.0)  # in force now
    sim: Simulator = field(init=False, repr=False)
    spec: CascadeSpec = field(init=False, repr=False)
    controller: CascadeController | None = field(init=False, default=None, repr=False)

    def run(self) -> CascadeRun:
        c = self.cascade
        rng = random.Random(self.seed)
        self.queries = [Query(t, c.draw_confidence(rng)) for t in self.arrivals]
        cfg = SimConfig(gpus=c.executors, gpu=A100, policy="fifo", slo_s=c.slo_s, shed_factor=c.shed_factor)
        self.sim = Simulator(cfg, workflows(c), profiles(c), hooks=self)
        self.spec = CascadeSpec(
            "cascade",
            StageSpec(c.light, 1),
            StageSpec(c.heavy, 50),
            DISCRIMINATOR,
            c.slo_s,
            Policy(threshold_step=0.01, batch_sizes=c.batch_sizes),
        )
        self.controller = self._controller() if self.policy == "adaptive" else None
        self.apply(self.plan)
        wf = HEAVY_WF if self.policy == "heavy" else CASCADE_WF
        self.sim.run([TraceRequest(t, "cascade", wf) for t in self.arrivals])
        return self

    def _controller(self) -> CascadeController:
        ctl = CascadeController(
            budget=self.cascade.executors, period_s=5.0, tick_s=1.0, solver="milp", clock=lambda: self.sim.now
        )
        ctl.add(self.spec)
        for b in self.cascade.batch_sizes:  # offline profiling, as DiffServe does
            ctl.record_latency(
                "cascade",
                "light",
                b,
                self.sim.load_costs.run_s(self.cascade.light, b) + self.sim.load_costs.run_s(DISCRIMINATOR, b),
            )
            ctl.record_latency("cascade", "heavy", b, self.sim.load_costs.run_s(self.cascade.heavy, b))
        ctl.on_decision(lambda _, decision: self.apply(decision))
        return ctl

    def apply(self, decision: Allocation) -> None:
        """A decision, applied as the head receives one, plus the executor split as replica floors."""
        self.threshold = decision.threshold
        dispatcher = self.sim.dispatcher
        apply_batch_sizes(dispatcher, self.spec, decision, model_key=lambda checkpoint: checkpoint)
        dispatcher.set_batch_size(DISCRIMINATOR, max(decision.light_batch, 1))
        self.sim.scaling.set_floor(self.cascade.light, decision.light_executors)
        self.sim.scaling.set_floor(self.cascade.heavy, decision.heavy_executors)
        if self.controller is not None:
            self.thresholds.append((self.sim.now, decision.threshold))

    # SimHooks ---------------------------------------------------------------------------------------
    def arrived(self, req: SimRequest) -> None:
        if self.controller is not None:
            self.controller.enter("cascade", "heavy" if req.wf.name == HEAVY_WF else "light")
            self.controller.record_arrival("cascade")  # ticks the controller (simulated clock)

    def runs(self, req: SimRequest, node: int) -> bool:
        if req.wf.name != CASCADE_WF or node != HEAVY_NODE:
            return True
        q = self.queries[req.idx]
        deferred = q.confidence < self.threshold
        if deferred:
            self._measure("enter", "heavy")
        else:
            q.finish, q.answered = self.sim.now, "light"
        if self.controller is not None:
            self.controller.record_confidence("cascade", q.confidence, "heavy" if deferred else "light")
        return deferred

    def ran(self, invs: Sequence[SimInvocation], seconds: float) -> None:
        model = invs[0].model_key
        if model == DISCRIMINATOR:  # the light stage ends with its score
            self._measure("leave", "light", len(invs))
        elif model == self.cascade.heavy:
            self._measure("leave", "heavy", len(invs))
            for inv in invs:
                q = self.queries[inv.payload.request.idx]
                q.finish, q.answered = self.sim.now, "heavy"

    def shed(self, inv: SimInvocation) -> None:
        self.queries[inv.payload.request.idx].dropped = True
        self._measure("leave", "heavy" if inv.model_key == self.cascade.heavy else "light")

    def _measure(self, event: str, stage: str, n: int = 1) -> None:
        if self.controller is not None:
            getattr(self.controller, event)("cascade", stage, n)

    # results ----------------------------------------------------------------------------------------
    def late(self, q: Query) -> bool:
        return q.dropped or q.finish is None or q.finish - q.arrival > self.cascade.slo_s

    def summary(self) -> dict:
        n = len(self.queries)
        heavy = sum(q.answered == "heavy" for q in self.queries)
        served = sum(bool(q.answered) for q in self.queries)
        share = heavy / max(served, 1)
        return {
            "policy": self.policy,
            "queries": n,
            "slo_violation": sum(map(self.late, self.queries)) / n,
            "heavy_share": share,
            "fid": self.cascade.modelled_fid(1 - share),
        }

    def series(self, bucket_s: float = 10.0) -> dict[str, np.ndarray]:
        """Demand, violation ratio and heavy share per `bucket_s` of arrival time."""
        edges = np.arange(0, max(self.arrivals) + bucket_s, bucket_s)
        idx = np.digitize([q.arrival for q in self.queries], edges) - 1
        out = {"t": edges[:-1], **{k: np.zeros(len(edges) - 1) for k in ("qps", "violation", "heavy_share")}}
        for k in range(len(edges) - 1):
            qs = [q for q, i in zip(self.queries, idx) if i == k]
            if qs:
                out["qps"][k] = len(qs) / bucket_s
                out["violation"][k] = sum(map(self.late, qs)) / len(qs)
                out["heavy_share"][k] = sum(q.answered == "heavy" for q in qs) / len(qs)
        return out


def simulate(
    c: Cascade, policy: str, arrivals: Sequence[float], seed: int = 0, static_demand: float | None = None
) -> CascadeRun:
    """Run one policy; `static` is provisioned for `static_demand` (default: the trace's peak)."""
    n = c.executors
    if policy == "light":
        plan = Allocation(0.0, 16, 0, n, 0, 0.0, "fixed")
    elif policy == "heavy":
        plan = Allocation(1.0, 1, 4, 0, n, 1.0, "fixed")
    elif policy == "static":
        plan = c.allocation_for(peak_demand(arrivals) if static_demand is None else static_demand)
    elif policy == "adaptive":  # until the controller's first decision, a tick in
        plan = Allocation(0.0, 4, 4, n // 2, n - n // 2, 0.0, "initial")
    else:
        raise ValueError(f"unknown policy {policy!r}; choose one of {POLICIES}")
    return CascadeRun(c, policy, arrivals, plan, seed).run()
