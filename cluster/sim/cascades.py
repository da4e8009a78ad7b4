"""Static vs adaptive cascades (DiffServe) for the report: a sweep of peak demand.

Each point replays a rising-then-falling Poisson demand through the cascade scenario of the simulator
(cluster/sim/cascade_scenario.py: the head's dispatch policy, DiffServe's profiled latencies), under
four policies: all-light, all-heavy, a static cascade provisioned once for the trace's peak
(DiffServe-Static), and the adaptive cascade whose threshold, batch sizes and executor split the
real controller re-solves (MILP) every 5 s from what it measures. Reported per peak: SLO violation
ratio, share answered by the heavy model and the FID modelled from it (lower is better), plus the
adaptive threshold over time at one peak. A second static cascade is provisioned for the trace's
mean demand: what an operator who does not know the peak in advance would pick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

POLICIES = ("light", "heavy", "static (peak)", "static (mean)", "adaptive")
PEAKS = (8.0, 16.0, 24.0, 32.0)


def available() -> bool:
    """The cascade package needs scipy (MILP) and yaml; the report leaves this section out without them."""
    try:
        import cluster.bench.cascade  # noqa: F401
    except ImportError:
        return False
    return True


def run(
    seconds: float = 120.0, peaks: Sequence[float] = PEAKS, executors: int = 16, low: float = 2.0, seed: int = 0
) -> dict | None:
    """Every policy at every peak; None when the cascade package cannot be imported."""
    if not available():
        return None
    from cluster.bench.cascade import C1, triangle_trace
    from cluster.sim.cascade_scenario import simulate

    cascade = replace(C1, executors=executors)
    out: dict = {
        "seconds": seconds,
        "executors": executors,
        "low": low,
        "peaks": list(peaks),
        "policies": {p: {"violation": [], "heavy_share": [], "fid": []} for p in POLICIES},
    }
    series_peak = peaks[len(peaks) // 2]
    for peak in peaks:
        arrivals = triangle_trace(seconds, low, peak, seed)
        mean_demand = 1.2 * len(arrivals) / seconds
        runs = {
            "light": simulate(cascade, "light", arrivals, seed),
            "heavy": simulate(cascade, "heavy", arrivals, seed),
            "static (peak)": simulate(cascade, "static", arrivals, seed),
            "static (mean)": simulate(cascade, "static", arrivals, seed, static_demand=mean_demand),
            "adaptive": simulate(cascade, "adaptive", arrivals, seed),
        }
        for policy, result in runs.items():
            s = result.summary()
            row = out["policies"][policy]
            row["violation"].append(s["slo_violation"])
            row["heavy_share"].append(s["heavy_share"])
            row["fid"].append(s["fid"])
        if peak == series_peak:
            adaptive = runs["adaptive"].series()
            out["series"] = {
                "peak": peak,
                "t": adaptive["t"].tolist(),
                "qps": adaptive["qps"].tolist(),
                "thresholds": [list(p) for p in runs["adaptive"].thresholds],
            }
            for policy in ("static (peak)", "static (mean)", "adaptive"):
                ts = runs[policy].series()
                out["series"][policy] = {
                    "violation": ts["violation"].tolist(),
                    "heavy_share": ts["heavy_share"].tolist(),
                }
    return out


def plot(data: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    for policy, row in data["policies"].items():
        width = 2 if policy == "adaptive" else 1.2
        axes[0].plot(data["peaks"], row["violation"], marker="o", label=policy, linewidth=width)
        axes[1].plot(data["peaks"], row["fid"], marker="o", label=policy, linewidth=width)
    axes[0].set_ylabel("SLO violation ratio")
    axes[1].set_ylabel("FID (modelled, lower is better)")
    for ax in axes[:2]:
        ax.set_xlabel("peak demand (queries/s)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    s = data["series"]
    ax = axes[2]
    for policy in ("static (peak)", "static (mean)", "adaptive"):
        ax.plot(s["t"], s[policy]["heavy_share"], label=f"{policy}: served by heavy")
    if s.get("thresholds"):
        t, thr = zip(*s["thresholds"])
        ax.step(t, thr, where="post", color="k", linewidth=0.8, label="adaptive threshold")
    ax2 = ax.twinx()
    ax2.plot(s["t"], s["qps"], color="grey", linestyle=":", label="demand")
    ax2.set_ylabel("demand (queries/s)", fontsize=8)
    ax.set_xlabel("time (s)")
    ax.set_title(f"over time at peak {s['peak']:g} q/s", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("Cascades (SD-Turbo -> SDv1.5): static vs adaptive", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(data: dict | None) -> list[str]:
    if data is None:
        return ["## Cascades", "", "Left out: the cascade package (scipy, yaml) could not be imported.", ""]
    peaks = data["peaks"]
    head = "| policy | " + " | ".join(f"peak {p:g} q/s: viol. / FID" for p in peaks) + " |"
    rows = [
        f"| {policy} | " + " | ".join(f"{v:.3f} / {f:.2f}" for v, f in zip(row["violation"], row["fid"])) + " |"
        for policy, row in data["policies"].items()
    ]
    pol = data["policies"]
    adaptive, peak, mean = pol["adaptive"], pol["static (peak)"], pol["static (mean)"]
    return [
        "## Cascades: static vs adaptive",
        "",
        f"{data['executors']} simulated executors with DiffServe's profiled A100 latencies, {data['seconds']:g} s "
        f"of Poisson demand rising from {data['low']:g} to the peak and back, SLO 5 s; the adaptive cascade runs "
        "the real controller and MILP (cluster/cascade) every 5 s; the static ones keep one allocation solved for "
        "the trace's peak or for its mean demand. "
        "FID is modelled from the share the light model answers (DiffServe's table).",
        "",
        head,
        "|---|" + "---|" * len(peaks),
        *rows,
        "",
        "- Mean over the peaks, SLO violation / modelled FID / share served by heavy: "
        + "; ".join(
            f"{name} {np.mean(r['violation']):.3f} / {np.mean(r['fid']):.2f} / {np.mean(r['heavy_share']):.2f}"
            for name, r in (("adaptive", adaptive), ("static (peak)", peak), ("static (mean)", mean))
        )
        + ". The static (peak) cascade is an oracle: it is solved for a peak known in advance.",
        "",
        "![](cascades.png)",
        "",
    ]
