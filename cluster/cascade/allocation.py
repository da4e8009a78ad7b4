"""DiffServe's resource allocation for one cascade, as an MILP (scipy/HiGHS) and by exhaustive search.

Choose a threshold t_k (one of a grid), a batch size per stage and an executor count per stage so that
  light capacity  x1 * p1(b1) >= D
  heavy capacity  x2 * p2(b2) >= D * f(t_k)
  latency         d1(b1) + [d2(b2) if the heavy stage runs] <= SLO
  executors       1 <= x1,  x1 + x2 <= S
maximising t (more queries reach the heavy model, better quality), then using the fewest executors.
p(b) = b / l(b) is the throughput of one executor at batch size b. A stage's delay d(b) = l(b) + w(b)
adds to the service time the wait before service: the larger of the measured queueing delay q
(Little's law, for the plan in force) and `batch_wait` x l(b), the part of a running batch a new query
is expected to wait out under the new plan, which no measurement has seen yet.

The capacity constraints multiply an integer (x) by a one-hot choice (b); they are linearised with
y_i = x * b_i, which four linear inequalities pin exactly when b_i is binary and x <= S (big-M = S).
When nothing is feasible the allocation degrades to all-light on every executor, with the shortfall
reported as the fraction of queries to shed by deadline.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

EPS = 1e-7  # capacity slack both solvers allow, so float noise cannot make them disagree


@dataclass(frozen=True)
class StageProfile:
    """Latency (seconds per batch) of one stage at each allowed batch size."""

    batch_sizes: tuple[int, ...]
    latency_s: tuple[float, ...]

    def throughput(self) -> np.ndarray:
        return np.array([b / s for b, s in zip(self.batch_sizes, self.latency_s)], dtype=float)


@dataclass(frozen=True)
class Problem:
    light: StageProfile
    heavy: StageProfile
    thresholds: tuple[float, ...]  # ascending
    deferred: tuple[float, ...]  # f(t_k): fraction of queries the discriminator sends to heavy
    demand: float  # queries per second, headroom included
    slo_s: float
    budget: int  # executors this cascade may use
    queue_light_s: float = 0.0
    queue_heavy_s: float = 0.0
    batch_wait: float = 0.0  # fraction of a batch's latency a query waits before its own starts

    def delays(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """d(b) per batch option of the light and the heavy stage: service plus expected wait."""

        def stage(profile: StageProfile, queue: float) -> tuple[float, ...]:
            return tuple(l + max(queue, self.batch_wait * l) for l in profile.latency_s)

        return stage(self.light, self.queue_light_s), stage(self.heavy, self.queue_heavy_s)


@dataclass(frozen=True)
class Allocation:
    threshold: float
    light_batch: int
    heavy_batch: int  # 0: the heavy stage is not used
    light_executors: int
    heavy_executors: int
    deferred: float  # f(threshold)
    status: str  # "optimal" or "degraded"
    shed_fraction: float = 0.0  # share of demand the light stage cannot absorb (degraded only)
    solve_ms: float = 0.0

    @property
    def executors(self) -> int:
        return self.light_executors + self.heavy_executors

    def as_dict(self) -> dict:
        return asdict(self)


def _ceil(x: float) -> int:
    return max(0, math.ceil(x - EPS))


def solve_exhaustive(p: Problem) -> Allocation | None:
    """The optimum by enumeration of (threshold, b1, b2); the executor counts follow in closed form."""
    p1, p2 = p.light.throughput(), p.heavy.throughput()
    d1, d2 = p.delays()
    best: tuple | None = None
    for k, (t, f) in enumerate(zip(p.thresholds, p.deferred)):
        heavy_load = p.demand * f
        for i in range(len(d1)):
            x1 = max(1, _ceil(p.demand / p1[i]))
            options = [(0, 0, 0.0)] if heavy_load <= EPS else []
            options += [(j + 1, _ceil(heavy_load / p2[j]), d2[j]) for j in range(len(d2))]
            for j1, x2, extra in options:
                if x1 + x2 > p.budget or d1[i] + extra > p.slo_s + EPS:
                    continue
                key = (k, -(x1 + x2))
                if best is None or key > best[0]:
                    best = (
                        key,
                        Allocation(
                            t, p.light.batch_sizes[i], p.heavy.batch_sizes[j1 - 1] if j1 else 0, x1, x2, f, "optimal"
                        ),
                    )
    return None if best is None else best[1]


def solve_milp(p: Problem) -> Allocation | None:
    """The same optimum from HiGHS; None when the instance is infeasible."""
    S, n1, n2, nk = p.budget, len(p.light.batch_sizes), len(p.heavy.batch_sizes), len(p.thresholds)
    if S < 1:
        return None
    # variable layout: x1, x2 | b1[n1] | b2[n2] | z[nk] | y1[n1] | y2[n2]
    ix1, ix2 = 0, 1
    b1 = 2 + np.arange(n1)
    b2 = b1[-1] + 1 + np.arange(n2)
    z = b2[-1] + 1 + np.arange(nk)
    y1 = z[-1] + 1 + np.arange(n1)
    y2 = y1[-1] + 1 + np.arange(n2)
    nv = int(y2[-1]) + 1
    rows, lo, hi = [], [], []

    def add(coeffs: dict, lower: float, upper: float) -> None:
        row = np.zeros(nv)
        for idx, c in coeffs.items():
            row[idx] += c
        rows.append(row)
        lo.append(lower)
        hi.append(upper)

    add({ix1: 1, ix2: 1}, -np.inf, S)
    add({int(i): 1 for i in b1}, 1, 1)
    add({int(j): 1 for j in b2}, 0, 1)
    add({int(k): 1 for k in z}, 1, 1)
    for ys, bs, x in ((y1, b1, ix1), (y2, b2, ix2)):
        for y, b in zip(ys, bs):
            y, b = int(y), int(b)
            add({y: 1, b: -S}, -np.inf, 0)  # y <= S*b
            add({y: 1, x: -1}, -np.inf, 0)  # y <= x
            add({y: 1, x: -1, b: -S}, -S, np.inf)  # y >= x - S*(1-b)
    p1, p2 = p.light.throughput(), p.heavy.throughput()
    add({int(y): float(c) for y, c in zip(y1, p1)}, p.demand - EPS, np.inf)
    add(
        {**{int(y): float(c) for y, c in zip(y2, p2)}, **{int(k): -p.demand * f for k, f in zip(z, p.deferred)}},
        -EPS,
        np.inf,
    )
    d1, d2 = p.delays()
    add({**{int(b): d for b, d in zip(b1, d1)}, **{int(b): d for b, d in zip(b2, d2)}}, -np.inf, p.slo_s + EPS)

    # Lexicographic objective in integers: threshold rank first, then fewer executors (x1+x2 <= S < S+1).
    c = np.zeros(nv)
    c[z] = -(S + 1) * np.arange(nk)
    c[[ix1, ix2]] = 1
    integrality = np.zeros(nv)
    integrality[: int(z[-1]) + 1] = 1
    lower = np.zeros(nv)
    lower[ix1] = 1
    upper = np.full(nv, float(S))
    upper[2 : int(z[-1]) + 1] = 1
    res = milp(
        c, constraints=LinearConstraint(np.array(rows), lo, hi), integrality=integrality, bounds=Bounds(lower, upper)
    )
    if res.status != 0 or res.x is None:
        return None
    x = np.round(res.x).astype(int)
    k = int(np.argmax(x[z]))
    i = int(np.argmax(x[b1]))
    j = int(np.argmax(x[b2])) if x[b2].sum() and x[ix2] > 0 else -1  # no executors: heavy unused
    x2 = int(x[ix2]) if j >= 0 else 0
    return Allocation(
        p.thresholds[k],
        p.light.batch_sizes[i],
        p.heavy.batch_sizes[j] if j >= 0 else 0,
        int(x[ix1]),
        x2,
        p.deferred[k],
        "optimal",
    )


def holds(p: Problem, a: Allocation) -> bool:
    """Whether allocation `a` (decided earlier) still meets every constraint of `p` (measured now).
    f is re-read at a's threshold from p's curve, so a shift in the confidences counts too."""
    if (
        a.status != "optimal"
        or a.executors > p.budget
        or a.threshold not in p.thresholds
        or a.light_batch not in p.light.batch_sizes
        or (a.heavy_batch and a.heavy_batch not in p.heavy.batch_sizes)
    ):
        return False
    d1, d2 = p.delays()
    i = p.light.batch_sizes.index(a.light_batch)
    if a.light_executors * p.light.throughput()[i] < p.demand - EPS:
        return False
    heavy_load = p.demand * p.deferred[p.thresholds.index(a.threshold)]
    if not a.heavy_batch:
        return heavy_load <= EPS and d1[i] <= p.slo_s + EPS
    j = p.heavy.batch_sizes.index(a.heavy_batch)
    return a.heavy_executors * p.heavy.throughput()[j] >= heavy_load - EPS and d1[i] + d2[j] <= p.slo_s + EPS


def degrade(p: Problem) -> Allocation:
    """All-light on every executor at the highest-throughput batch size that meets the SLO (the
    fastest one if none does); the queries beyond its capacity are shed by deadline."""
    p1 = p.light.throughput()
    fits = [i for i, d in enumerate(p.delays()[0]) if d <= p.slo_s]
    i = max(fits, key=lambda i: p1[i]) if fits else int(np.argmin(p.light.latency_s))
    x1 = max(1, p.budget)
    capacity = x1 * p1[i]
    shed = 0.0 if p.demand <= 0 else max(0.0, 1.0 - capacity / p.demand)
    k = int(np.argmin(p.deferred))  # the threshold deferring least (t = 0 defers nothing)
    return Allocation(p.thresholds[k], p.light.batch_sizes[i], 0, x1, 0, p.deferred[k], "degraded", shed)


def allocate(p: Problem, solver: str = "milp") -> Allocation:
    """Solve (MILP or exhaustive) and fall back to the degraded all-light allocation when infeasible."""
    start = time.perf_counter()
    result = (solve_milp if solver == "milp" else solve_exhaustive)(p)
    if result is None:
        result = degrade(p)
    ms = (time.perf_counter() - start) * 1e3
    return Allocation(**{**result.as_dict(), "solve_ms": round(ms, 3)})
