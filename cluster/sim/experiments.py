"""One simulation point from plain parameters (so sweeps can fan out over processes)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from cluster.sim.gpu_profiles import GPUS
from cluster.sim.results import SimResult
from cluster.sim.simulator import SimConfig, simulate
from cluster.sim.traces import TraceSpec, generate
from cluster.sim.workflows import catalogue

# The system under test and its baselines, as the report names them.
LINEUP = {
    "Comfy Cluster": ("ours", "vtime"),
    "MCache": ("mcache", "fifo"),
    "WCache": ("wcache", "fifo"),
    "NoCache": ("nocache", "fifo"),
}


@dataclass(frozen=True)
class Point:
    system: str = "ours"
    policy: str = "vtime"
    setting: str = "s1"
    gpus: int = 32
    gpu: str = "H800"
    rate: float = 8.0
    cov: float = 1.0
    slo_scale: float = 3.0
    delta: float = 10.0
    duration_s: float = 90.0
    warmup_s: float = 20.0
    tenants: int = 4
    seed: int = 0
    wait_for_warm: bool = True
    trace_kind: str = "mix"  # cluster.sim.traces: mix | paper
    startup_s: float = 0.0  # monolithic baselines: a function instance's start-up (0: a pool)
    keepalive_s: float = 60.0
    preload: bool = False  # ours: first L_e layers of requested models in idle memory

    def with_(self, **kw) -> Point:
        return replace(self, **kw)


def run_point(p: Point) -> SimResult:
    workflows, profiles = catalogue(p.setting)
    trace = generate(
        TraceSpec(duration_s=p.duration_s, rate=p.rate, cov=p.cov, tenants=p.tenants, seed=p.seed, kind=p.trace_kind),
        [w.name for w in workflows],
    )
    cfg = SimConfig(
        gpus=p.gpus,
        gpu=GPUS[p.gpu],
        system=p.system,
        policy=p.policy,
        delta=p.delta,
        slo_scale=p.slo_scale,
        warmup_s=p.warmup_s,
        wait_for_warm=p.wait_for_warm,
        startup_s=p.startup_s,
        keepalive_s=p.keepalive_s,
        preload=p.preload,
    )
    return simulate(cfg, trace, workflows, profiles)


def attainment_at(result: SimResult, slo_scale: float) -> float:
    """SLO attainment had the deadlines been `slo_scale` x solo latency (no policy here reads deadlines)."""
    reqs = result.measured
    if not reqs:
        return 1.0
    return sum(r.latency is not None and r.latency <= slo_scale * r.solo_s + 1e-9 for r in reqs) / len(reqs)


def crossing(
    xs: list[float], ys: list[float], target: float = 0.9, rising: bool = False, rule: str = "first"
) -> float | None:
    """Interpolated x where y crosses `target`; None when it never meets the target.

    Falling curves (attainment vs rate) are not monotonic in a short simulation, so two rules:
    "first" (the headline rule, conservative): x where y first drops below the target, every lower x
    at or above it (None when the lowest x already misses; the last x when it never drops);
    "last": the highest x still at or above the target before its last drop, which lets a curve that
    recovers after a dip count the rates past the dip. Rising curves (vs GPUs): the lowest x from which
    y stays at or above it."""
    if rule not in ("first", "last"):
        raise ValueError(f"crossing rule must be 'first' or 'last', got {rule!r}")
    xs, ys = list(xs), list(ys)
    ok = [y >= target for y in ys]
    if not any(ok):
        return None
    if rising:
        i = len(ok) - 1
        while i > 0 and ok[i - 1]:
            i -= 1
        if not ok[-1]:
            return None
        return xs[0] if i == 0 else float(np.interp(target, [ys[i - 1], ys[i]], [xs[i - 1], xs[i]]))
    if rule == "first":
        if not ok[0]:
            return None
        i = ok.index(False) - 1 if False in ok else len(ok) - 1
    else:
        i = max(k for k, v in enumerate(ok) if v)
    if i == len(ys) - 1:
        return xs[-1]
    return float(np.interp(target, [ys[i + 1], ys[i]], [xs[i + 1], xs[i]]))


def fewest_gpus(
    attainment: Callable[[int], float], target: float = 0.9, max_gpus: int = 1024
) -> tuple[int | None, dict[int, float]]:
    """The fewest GPUs whose run meets `target` SLO attainment, and every count tried with its attainment.

    Doubles the count from 1 until a run meets the target, then bisects between the last count that
    failed and the first that passed: about 2 log2(N) runs. Attainment rises with the GPU count except
    for noise of a request or two, so the answer can differ by a GPU from a full scan. None when even
    `max_gpus` falls short."""
    if not 0 < target <= 1:
        raise ValueError(f"target attainment must be in (0, 1], got {target}")
    tried: dict[int, float] = {}

    def meets(n: int) -> bool:
        tried[n] = attainment(n)
        return tried[n] >= target

    lo, hi = 0, 1
    while not meets(hi):
        if hi >= max_gpus:
            return None, tried
        lo, hi = hi, min(2 * hi, max_gpus)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if meets(mid):
            hi = mid
        else:
            lo = mid
    return hi, tried
