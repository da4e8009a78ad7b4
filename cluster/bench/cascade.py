"""Cascade benchmark: simulated executors with DiffServe's profiled A100 latencies, driven by the real
controller, on a rising-then-falling Poisson demand trace. Compares all-light, all-heavy, a static
cascade provisioned for the peak, and the adaptive cascade.

Executors sleep the profiled latency of the batch they serve (DiffServe's simulation mode); a query
is dropped when its projected finish passes 1.5 x SLO, and violates the SLO when dropped or late.
Confidences are drawn from DiffServe's measured f(t) of cascade C1 (SD-Turbo -> SDv1.5), and quality is
modelled, as DiffServe does, from the fraction served by the light model through its FID table.

    python -m cluster.bench.cascade [--seconds 240] [--peak 28] [--executors 16] [--plot out.png]
"""
from __future__ import annotations

import argparse
import heapq
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from cluster.cascade.allocation import Allocation, Problem, allocate
from cluster.cascade.controller import CascadeController
from cluster.cascade.profiles import DIFFSERVE_MS, DISCRIMINATOR_MS, reference_profile
from cluster.cascade.spec import CascadeSpec, Policy, StageSpec

# DiffServe C1: f(t) points and FID by fraction served by the light model (peers-and-diffserve.md §1.2, §1.6).
C1_DEFERRED = ((0.0, 0.0), (0.02, 0.26), (0.05, 0.36), (0.10, 0.449), (0.20, 0.582), (0.30, 0.788),
               (0.50, 0.993), (0.56, 1.0), (1.0, 1.0))
C1_FID = (18.55, 17.85, 17.33, 16.98, 16.79, 16.95, 17.26, 17.95, 18.86, 20.17, 22.77)
LIGHT, HEAVY = "sdturbo", "sdv15"
BATCHES = (1, 2, 4, 8, 16)
NAME = "c1"


def modelled_fid(light_fraction: float) -> float:
    return float(np.interp(light_fraction, np.linspace(0, 1, len(C1_FID)), C1_FID))


def draw_confidence(rng: random.Random) -> float:
    """Inverse-CDF sample: P(confidence < t) = f(t) of C1."""
    ts, fs = zip(*C1_DEFERRED)
    return float(np.interp(rng.random(), fs, ts))


def triangle_trace(seconds: float, low: float, peak: float, seed: int) -> list[float]:
    """Poisson arrival times whose rate rises linearly from `low` to `peak` and falls back."""
    rng, t, out = random.Random(seed), 0.0, []
    while True:
        rate = low + (peak - low) * (1 - abs(2 * t / seconds - 1))
        t += rng.expovariate(max(rate, 1e-3))
        if t >= seconds:
            return out
        out.append(t)


@dataclass
class Query:
    arrival: float
    confidence: float
    finish: float | None = None
    answered: str = ""
    dropped: bool = False


@dataclass
class Worker:
    role: str = "light"
    busy: bool = False


@dataclass
class Plan:
    threshold: float
    batch: dict[str, int]
    roles: list[str]


def plan_from(a: Allocation, executors: int) -> Plan:
    """Worker roles from a decision; spare executors reinforce the bottleneck stage."""
    spare = executors - a.executors
    heavy = a.heavy_executors + (spare if a.heavy_batch else 0)
    light = executors - heavy
    return Plan(a.threshold, {"light": a.light_batch, "heavy": a.heavy_batch or BATCHES[0]},
                ["light"] * light + ["heavy"] * heavy)


@dataclass
class Simulation:
    policy: str                        # light | heavy | static | adaptive
    arrivals: Sequence[float]
    executors: int = 16
    slo_s: float = 5.0
    seed: int = 0
    queries: list[Query] = field(default_factory=list)
    thresholds: list[tuple[float, float]] = field(default_factory=list)

    def run(self) -> "Simulation":
        rng = random.Random(self.seed)
        self.now = 0.0
        # DiffServe's cadence (measure every 1 s, solve every 5 s), plus a solve within a tick whenever the
        # decision in force stops fitting the measurements (see controller.py).
        self.ctl = CascadeController(budget=self.executors, period_s=5.0, tick_s=1.0, solver="milp",
                                     clock=lambda: self.now)
        spec = CascadeSpec(NAME, StageSpec(LIGHT, 1), StageSpec(HEAVY, 50), "efficientnet", self.slo_s,
                           Policy(threshold_step=0.01, batch_sizes=BATCHES))
        self.ctl.add(spec)
        for stage, model in (("light", LIGHT), ("heavy", HEAVY)):   # offline profiling, as DiffServe does
            for b in BATCHES:
                self.ctl.record_latency(NAME, stage, b, self._latency(stage, b))
        self.ctl.on_decision(lambda _, a: self._apply(plan_from(a, self.executors)))
        self.plan = self._initial_plan()
        self.workers = [Worker(role) for role in self.plan.roles]
        self.queues: dict[str, deque[Query]] = {"light": deque(), "heavy": deque()}
        self.events: list = []
        self._seq = 0
        for t in self.arrivals:
            self._push(t, "arrive", Query(t, draw_confidence(rng)))
        while self.events:
            self.now, _, kind, payload = heapq.heappop(self.events)
            if kind == "arrive":
                self._arrive(payload)
            else:
                self._done(*payload)
            self._dispatch()
        return self

    # -- policies ---------------------------------------------------------------------------------
    def _latency(self, stage: str, batch: int) -> float:
        table = DIFFSERVE_MS[LIGHT if stage == "light" else HEAVY]
        padded = min(b for b in table if b >= batch)   # a partial batch costs its padded size
        extra = DISCRIMINATOR_MS / 1e3 if stage == "light" and self.policy != "heavy" else 0.0
        return table[padded] / 1e3 + extra

    def _initial_plan(self) -> Plan:
        if self.policy == "light":
            return Plan(0.0, {"light": 16, "heavy": 1}, ["light"] * self.executors)
        if self.policy == "heavy":
            return Plan(1.0, {"light": 1, "heavy": 4}, ["heavy"] * self.executors)
        if self.policy == "static":   # DiffServe-Static: the allocation for the trace's peak, kept throughout
            peak = 1.2 * max(np.histogram(self.arrivals, bins=int(max(self.arrivals)) + 1)[0].max(), 1)
            grid = tuple(round(0.01 * i, 2) for i in range(101))
            f = tuple(float(np.interp(t, *zip(*C1_DEFERRED))) for t in grid)
            return plan_from(allocate(Problem(reference_profile(LIGHT, BATCHES, DISCRIMINATOR_MS / 1e3),
                                              reference_profile(HEAVY, BATCHES), grid, f, peak, self.slo_s,
                                              self.executors)), self.executors)
        return Plan(0.0, {"light": 4, "heavy": 4}, ["light"] * (self.executors // 2)
                    + ["heavy"] * (self.executors - self.executors // 2))

    def _apply(self, plan: Plan) -> None:
        if self.policy != "adaptive":
            return
        self.plan = plan
        for w, role in zip(self.workers, plan.roles):
            w.role = role                       # a busy worker switches after its current batch
        self.thresholds.append((self.now, plan.threshold))
        if "heavy" not in plan.roles:            # no heavy executor left: queued deferrals keep their light answer
            while self.queues["heavy"]:
                q = self.queues["heavy"].popleft()
                q.finish, q.answered = self.now, "light"
                self.ctl.leave(NAME, "heavy")

    # -- events -----------------------------------------------------------------------------------
    def _push(self, t: float, kind: str, payload) -> None:
        self._seq += 1
        heapq.heappush(self.events, (t, self._seq, kind, payload))

    def _arrive(self, q: Query) -> None:
        self.queries.append(q)
        stage = "heavy" if self.policy == "heavy" else "light"
        self.queues[stage].append(q)
        self.ctl.enter(NAME, stage)
        self.ctl.record_arrival(NAME)            # ticks the controller every period (sim clock)

    def _done(self, worker: Worker, stage: str, batch: list[Query]) -> None:
        worker.busy = False
        self.ctl.leave(NAME, stage, len(batch))
        for q in batch:
            if stage == "light" and q.confidence < self.plan.threshold:
                self.ctl.record_confidence(NAME, q.confidence, "heavy")
                self.queues["heavy"].append(q)
                self.ctl.enter(NAME, "heavy")
            else:
                if stage == "light" and self.policy != "light":
                    self.ctl.record_confidence(NAME, q.confidence, "light")
                q.finish, q.answered = self.now, stage

    def _dispatch(self) -> None:
        for w in self.workers:
            if w.busy:
                continue
            queue, size = self.queues[w.role], self.plan.batch[w.role]
            batch: list[Query] = []
            while queue and len(batch) < size:
                q = queue.popleft()
                if self.now + self._latency(w.role, size) > q.arrival + 1.5 * self.slo_s:
                    q.dropped = True             # cannot finish in time: shed it (DiffServe's workers do)
                    self.ctl.leave(NAME, w.role)
                    continue
                batch.append(q)
            if batch:
                w.busy = True
                self._push(self.now + self._latency(w.role, len(batch)), "done", (w, w.role, batch))

    # -- results ----------------------------------------------------------------------------------
    def summary(self) -> dict:
        n = len(self.queries)
        late = sum(1 for q in self.queries if q.dropped or q.finish is None or q.finish - q.arrival > self.slo_s)
        heavy = sum(1 for q in self.queries if q.answered == "heavy")
        served = sum(1 for q in self.queries if q.answered)
        return {"policy": self.policy, "queries": n, "slo_violation": late / n,
                "heavy_share": heavy / max(served, 1), "fid": modelled_fid(1 - heavy / max(served, 1))}

    def series(self, bucket_s: float = 10.0) -> dict[str, np.ndarray]:
        end = max(self.arrivals)
        edges = np.arange(0, end + bucket_s, bucket_s)
        idx = np.digitize([q.arrival for q in self.queries], edges) - 1
        out = {"t": edges[:-1], "qps": np.zeros(len(edges) - 1), "violation": np.zeros(len(edges) - 1),
               "heavy_share": np.zeros(len(edges) - 1)}
        for k in range(len(edges) - 1):
            qs = [q for q, i in zip(self.queries, idx) if i == k]
            if not qs:
                continue
            out["qps"][k] = len(qs) / bucket_s
            out["violation"][k] = sum(q.dropped or q.finish is None or q.finish - q.arrival > self.slo_s
                                      for q in qs) / len(qs)
            out["heavy_share"][k] = sum(q.answered == "heavy" for q in qs) / len(qs)
        return out


def compare(seconds: float = 240, low: float = 2, peak: float = 28, executors: int = 16,
            seed: int = 0) -> list[Simulation]:
    arrivals = triangle_trace(seconds, low, peak, seed)
    return [Simulation(p, arrivals, executors, seed=seed).run() for p in ("light", "heavy", "static", "adaptive")]


def plot(sims: list[Simulation], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(4, 1, figsize=(8, 10), sharex=True)
    for sim in sims:
        s = sim.series()
        axes[1].plot(s["t"], s["violation"], label=sim.policy)
        axes[2].plot(s["t"], s["heavy_share"], label=sim.policy)
        if sim.thresholds:
            t, th = zip(*sim.thresholds)
            axes[3].step(t, th, where="post", label=sim.policy, color="tab:red")
    axes[0].plot(sims[0].series()["t"], sims[0].series()["qps"], color="k")
    axes[0].set_ylabel("demand (qps)")
    axes[1].set_ylabel("SLO violation ratio")
    axes[2].set_ylabel("served by heavy")
    axes[3].set_ylabel("adaptive threshold")
    axes[3].set_xlabel("time (s)")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(path)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="cascade-bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=240)
    ap.add_argument("--low", type=float, default=2)
    ap.add_argument("--peak", type=float, default=28)
    ap.add_argument("--executors", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot", default=None, help="write the curves to this PNG")
    args = ap.parse_args(argv)
    sims = compare(args.seconds, args.low, args.peak, args.executors, args.seed)
    print(f"{'policy':10} {'queries':>8} {'SLO viol.':>10} {'heavy share':>12} {'FID (modelled)':>15}")
    for sim in sims:
        s = sim.summary()
        print(f"{s['policy']:10} {s['queries']:8d} {s['slo_violation']:10.3f} {s['heavy_share']:12.3f} {s['fid']:15.2f}")
    if args.plot:
        plot(sims, args.plot)
        print(args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
