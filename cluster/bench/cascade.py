"""Cascade benchmark: DiffServe's cascade C1 (SD-Turbo -> SDv1.5) as a scenario of the simulator
(cluster/sim/cascade_scenario.py: the head's dispatch policy over executors with DiffServe's profiled
A100 latencies, the real controller on the simulated clock) on a rising-then-falling Poisson demand.
Compares all-light, all-heavy, a static cascade provisioned for the peak, and the adaptive cascade.

A query is shed when it cannot finish within 1.5 x SLO, and violates the SLO when shed or late.
Confidences are drawn from DiffServe's measured f(t) of C1, and quality is modelled, as DiffServe
does, from the fraction served by the light model through its FID table.

    python -m cluster.bench.cascade [--seconds 240] [--peak 28] [--executors 16] [--plot out.png]
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence
from dataclasses import replace

from cluster.bench import results
from cluster.sim.cascade_scenario import POLICIES, Cascade, CascadeRun, simulate

# DiffServe C1: f(t) points and FID by fraction served by the light model (peers-and-diffserve.md §1.2, §1.6).
C1_DEFERRED = (
    (0.0, 0.0),
    (0.02, 0.26),
    (0.05, 0.36),
    (0.10, 0.449),
    (0.20, 0.582),
    (0.30, 0.788),
    (0.50, 0.993),
    (0.56, 1.0),
    (1.0, 1.0),
)
C1_FID = (18.55, 17.85, 17.33, 16.98, 16.79, 16.95, 17.26, 17.95, 18.86, 20.17, 22.77)
C1 = Cascade(C1_DEFERRED, C1_FID, light="sdturbo", heavy="sdv15")


def modelled_fid(light_fraction: float) -> float:
    return C1.modelled_fid(light_fraction)


def triangle_trace(seconds: float, low: float, peak: float, seed: int) -> list[float]:
    """Poisson arrival times whose rate rises linearly from `low` to `peak` and falls back."""
    rng, t, out = random.Random(seed), 0.0, []
    while True:
        rate = low + (peak - low) * (1 - abs(2 * t / seconds - 1))
        t += rng.expovariate(max(rate, 1e-3))
        if t >= seconds:
            return out
        out.append(t)


def compare(
    seconds: float = 240, low: float = 2, peak: float = 28, executors: int = 16, seed: int = 0
) -> list[CascadeRun]:
    arrivals = triangle_trace(seconds, low, peak, seed)
    cascade = replace(C1, executors=executors)
    return [simulate(cascade, p, arrivals, seed) for p in POLICIES]


def plot(runs: list[CascadeRun], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(4, 1, figsize=(8, 10), sharex=True)
    for run in runs:
        s = run.series()
        axes[1].plot(s["t"], s["violation"], label=run.policy)
        axes[2].plot(s["t"], s["heavy_share"], label=run.policy)
        if run.thresholds:
            t, th = zip(*run.thresholds)
            axes[3].step(t, th, where="post", label=run.policy, color="tab:red")
    axes[0].plot(runs[0].series()["t"], runs[0].series()["qps"], color="k")
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
    record = results.begin("cascade", argv)
    runs = compare(args.seconds, args.low, args.peak, args.executors, args.seed)
    print(f"{'policy':10} {'queries':>8} {'SLO viol.':>10} {'heavy share':>12} {'FID (modelled)':>15}")
    summaries = [run.summary() for run in runs]
    for s in summaries:
        print(
            f"{s['policy']:10} {s['queries']:8d} {s['slo_violation']:10.3f} {s['heavy_share']:12.3f} {s['fid']:15.2f}"
        )
    record.write(summaries, {s["policy"]: s for s in summaries}, config=vars(args))
    if args.plot:
        plot(runs, args.plot)
        print(args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
