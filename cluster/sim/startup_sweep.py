"""The report's faithful comparison: the paper's monolithic baselines as serverless function instances,
on the paper's trace shape, as a function of the instances' start-up cost S.

The paper counts every cold-start cost of a baseline instance except fetching its image (§2.3) and never
states what that cost is; the gap between Comfy Cluster and MCache is decided by it. So the headline is
given for S = 0, 5, 10 and 20 s, each on the `paper` trace (one bursty tenant per workflow, nothing cut as
warm-up), with Comfy Cluster preloading first layers into idle memory (§5.1), and at the default S: what a
monolithic Diffusers instance was measured to pay on a CPU before its weights load (`DEFAULT_STARTUP_S`), a
lower bound for S on a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from cluster.sim.experiments import Point, crossing, fewest_gpus, run_point

# `comfy-cluster bench startup` (comfy_bridge/bench/startup.py) on the 2-core CPU development machine, 2026-12-03,
# load average 2.9: 7.77 s, the median over 5 rounds of fresh processes of process start + torch, diffusers and
# transformers imports + Flux1-Dev's pipeline modules built on the meta device + a warm-up forward (SD3.5-Large's:
# 7.81 s); docs/benchmarks/bench_startup.json. No CUDA context, graph capture or compilation: a lower bound for a
# GPU instance's S on a machine of this speed.
DEFAULT_STARTUP_S = 7.8
STARTUP_SOURCE = (
    "`comfy-cluster bench startup`: a fresh process's start, torch + diffusers + transformers "
    "imports, an S1 pipeline's modules built on the meta device and a warm-up forward, 7.77 s (median "
    "of 5 rounds on a 2-core CPU machine, load average 2.9); a GPU instance also creates its CUDA "
    "context and may capture graphs or compile, so this is a lower bound for its S on a machine of "
    "this speed"
)
STARTUPS = tuple(sorted({0.0, 5.0, 10.0, 20.0, DEFAULT_STARTUP_S}))
BASELINES = {"MCache": "mcache", "WCache": "wcache", "NoCache": "nocache"}
OURS = "Comfy Cluster"
PLAN_RATE = 1.0  # req/s of the GPU count figure (the paper's Fig. 10c operating point)
PAPER_MEMORY = {"NoCache": 0.13, "WCache": 0.29, "MCache": 0.71, OURS: 0.88}  # §8.2, S1 at rate scale 1.5


def _attainment(p: Point) -> tuple[float, float]:
    r = run_point(p)
    return r.attainment, r.memory_utilisation


def _gpus(job: tuple[Point, tuple[int, ...], int]) -> int | None:
    point, seeds, max_gpus = job
    gpus, _ = fewest_gpus(
        lambda n: float(np.mean([run_point(point.with_(gpus=n, seed=s)).attainment for s in seeds])), 0.9, max_gpus
    )
    return gpus


def points(base: Point, startups: Sequence[float] = STARTUPS) -> dict[str, Point]:
    """Comfy Cluster and each baseline at each S, on the paper trace."""
    out = {OURS: base.with_(system="ours", policy="vtime", preload=True)}
    for name, system in BASELINES.items():
        for s in startups:
            out[f"{name}@{s:g}"] = base.with_(system=system, policy="fifo", startup_s=s)
    return out


def run(
    base: Point,
    rates: Sequence[float],
    seeds: Sequence[int],
    workers: int,
    duration_s: float,
    max_gpus: int = 96,
    startups: Sequence[float] = STARTUPS,
) -> dict:
    """Every system at every rate and seed; `duration_s` long traces (a tenant's bursts and the instances'
    keep-alive need minutes to show)."""
    base = base.with_(trace_kind="paper", warmup_s=0.0, duration_s=duration_s)
    startups = sorted(set(startups))
    systems = points(base, startups)
    jobs = {(k, r, s): p.with_(rate=r, seed=s) for k, p in systems.items() for r in rates for s in seeds}
    planned = [OURS] + [f"MCache@{s:g}" for s in startups]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        gpu_f = {k: pool.submit(_gpus, (systems[k].with_(rate=PLAN_RATE), tuple(seeds), max_gpus)) for k in planned}
        keys = list(jobs)
        got = dict(zip(keys, pool.map(_attainment, [jobs[k] for k in keys])))
        gpus = {k: f.result() for k, f in gpu_f.items()}
    by_seed = {k: {str(s): [got[(k, r, s)][0] for r in rates] for s in seeds} for k in systems}
    curve = {k: [float(np.mean([got[(k, r, s)][0] for s in seeds])) for r in rates] for k in systems}
    memory_rate = rates[min(range(len(rates)), key=lambda i: abs(rates[i] - 1.5 * PLAN_RATE))]
    memory = {k: float(np.mean([got[(k, memory_rate, s)][1] for s in seeds])) for k in systems}
    # the headline rule is the first crossing of the mean curve; the last one and each seed's are kept to show
    # how much the rule and the seed move it
    rate_at = {k: crossing(list(rates), curve[k]) for k in systems}
    rate_at_last = {k: crossing(list(rates), curve[k], rule="last") for k in systems}
    rate_at_by_seed = {k: {s: crossing(list(rates), c) for s, c in by_seed[k].items()} for k in systems}
    return {
        "rates": list(rates),
        "startups": startups,
        "default_s": DEFAULT_STARTUP_S,
        "seeds": list(seeds),
        "curve": curve,
        "curve_by_seed": by_seed,
        "rate_at_90": rate_at,
        "rate_at_90_last": rate_at_last,
        "rate_at_90_by_seed": rate_at_by_seed,
        "gain_at_0": gain_at_0(rate_at, rate_at_by_seed),
        "gpus_at_plan_rate": gpus,
        "plan_rate": PLAN_RATE,
        "memory": memory,
        "memory_rate": memory_rate,
        "twice_needs_s": twice_needs(rate_at, startups),
        "half_gpus_needs_s": half_gpus_needs(gpus, startups),
    }


def gain_at_0(rate_at: dict[str, float | None], by_seed: dict[str, dict[str, float | None]]) -> dict | None:
    """Comfy Cluster's rate at 90 % over MCache's at S = 0 (first crossings): on the mean curves, and the least
    and greatest of the seeds' own ratios (None where a seed's MCache never reaches 90 %)."""
    key = "MCache@0"
    if key not in rate_at:
        return None
    ratio = lambda a, b: None if a is None or not b else a / b
    seeds = [ratio(by_seed[OURS][s], by_seed[key][s]) for s in by_seed[OURS]]
    known = [r for r in seeds if r is not None]
    return {
        "ours": rate_at[OURS],
        "mcache": rate_at[key],
        "ratio": ratio(rate_at[OURS], rate_at[key]),
        "ratio_by_seed": seeds,
        "ratio_min": min(known) if known else None,
        "ratio_max": max(known) if known else None,
    }


def twice_needs(rate_at: dict[str, float | None], startups: Sequence[float] = STARTUPS) -> float | None:
    """The smallest swept S at which Comfy Cluster's rate at 90 % is at least twice MCache's, an MCache that
    meets 90 % at no swept rate counting as below half (None: at no swept S)."""
    ours = rate_at.get(OURS)
    for s in sorted(startups):
        mcache = rate_at.get(f"MCache@{s:g}")
        if ours is not None and (mcache is None or ours >= 2 * mcache):
            return s
    return None


def half_gpus_needs(gpus: dict[str, int | None], startups: Sequence[float] = STARTUPS) -> float | None:
    """The smallest swept S at which Comfy Cluster needs at most half MCache's GPUs at the plan rate, an MCache
    that needs more than the most tried counting as twice (None: at no swept S)."""
    ours = gpus.get(OURS)
    for s in sorted(startups):
        mcache = gpus.get(f"MCache@{s:g}")
        if ours is not None and (mcache is None or 2 * ours <= mcache):
            return s
    return None


def _fmt(x: float | None) -> str:
    return "not reached" if x is None else f"{x:.2f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def plot(d: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.4))
    ax.plot(d["rates"], d["curve"][OURS], marker="o", linewidth=2, label=OURS)
    for s in d["startups"]:
        ax.plot(d["rates"], d["curve"][f"MCache@{s:g}"], marker=".", label=f"MCache, S = {s:g} s")
    ax.axhline(0.9, color="grey", linestyle=":")
    ax.set_xlabel("request rate (req/s)")
    ax.set_ylabel("SLO attainment")
    ax.set_title("Paper trace: MCache as function instances")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def at_default(d: dict) -> dict | None:
    """Comfy Cluster against MCache at the default S: rates at 90 % and GPUs at the plan rate, and whether the
    targets hold (None: the default S was not swept)."""
    key = f"MCache@{d['default_s']:g}"
    if key not in d["rate_at_90"]:
        return None
    ours_rate, m_rate = d["rate_at_90"][OURS], d["rate_at_90"].get(key)
    ours_gpus, m_gpus = d["gpus_at_plan_rate"][OURS], d["gpus_at_plan_rate"].get(key)
    return {
        "s": d["default_s"],
        "ours_rate": ours_rate,
        "mcache_rate": m_rate,
        "ours_gpus": ours_gpus,
        "mcache_gpus": m_gpus,
        "twice_rate": ours_rate is not None and (m_rate is None or ours_rate >= 2 * m_rate),
        "half_gpus": ours_gpus is not None and (m_gpus is None or 2 * ours_gpus <= m_gpus),
    }


def headline(d: dict | None, max_gpus: int = 96) -> list[str]:
    """The report's headline line at the default S."""
    a = at_default(d) if d else None
    if a is None:
        return []
    gpus = lambda n: f"more than {max_gpus}" if n is None else str(n)
    held = {
        (True, True): "both the 2x rate and the half-the-GPUs targets hold",
        (True, False): "the 2x rate target holds, the half-the-GPUs one does not",
        (False, True): "the half-the-GPUs target holds, the 2x rate one does not",
        (False, False): "neither the 2x rate nor the half-the-GPUs target holds",
    }[(a["twice_rate"], a["half_gpus"])]
    mcache = (
        f"**{_fmt(a['mcache_rate'])} req/s** ({_ratio(a['ours_rate'], a['mcache_rate'])})"
        if a["mcache_rate"] is not None
        else f"at no swept rate (the lowest: {min(d['rates']):g} req/s)"
    )
    return [
        f"- At the default start-up S = {a['s']:g} s (measured on a CPU by `comfy-cluster bench startup`: a lower "
        "bound for a GPU instance), on the paper's trace: Comfy Cluster meets 90 % SLO attainment up to "
        f"**{_fmt(a['ours_rate'])} req/s**, MCache as function instances {mcache}; at {d['plan_rate']:g} req/s "
        f"Comfy Cluster needs **{gpus(a['ours_gpus'])} GPUs**, MCache **{gpus(a['mcache_gpus'])}**: {held}."
    ]


def _curves_at_default(d: dict) -> list[str]:
    """Attainment at each swept rate, Comfy Cluster and MCache at the default S: how near 90 % MCache comes."""
    key = f"MCache@{d['default_s']:g}"
    if key not in d["curve"]:
        return []
    row = lambda k: " / ".join(f"{100 * a:.0f}" for a in d["curve"][k])
    return [
        f"SLO attainment (%) at {' / '.join(f'{r:g}' for r in d['rates'])} req/s: Comfy Cluster {row(OURS)}; "
        f"MCache at S = {d['default_s']:g} s {row(key)}.",
        "",
    ]


def markdown(d: dict | None, max_gpus: int = 96) -> list[str]:
    if not d:
        return []
    ours_rate, ours_gpus = d["rate_at_90"][OURS], d["gpus_at_plan_rate"][OURS]
    rows = []
    for s in d["startups"]:
        m_rate, m_gpus = d["rate_at_90"][f"MCache@{s:g}"], d["gpus_at_plan_rate"][f"MCache@{s:g}"]
        label = f"**{s:g} (default)**" if s == d["default_s"] else f"{s:g}"
        rows.append(
            f"| {label} | {_fmt(m_rate)} | {_fmt(d['rate_at_90'][f'WCache@{s:g}'])} | "
            f"{_fmt(d['rate_at_90'][f'NoCache@{s:g}'])} | {_ratio(ours_rate, m_rate)} | "
            f"{m_gpus if m_gpus is not None else f'more than {max_gpus}'} | {_ratio(m_gpus, ours_gpus)} |"
        )
    need, half = d["twice_needs_s"], d["half_gpus_needs_s"]
    swept = ", ".join(f"{s:g}" for s in d["startups"])
    mem = d["memory"]
    mem_s = next(s for s in (10.0, d["default_s"], max(d["startups"])) if s in d["startups"])
    return [
        "## The paper's setting: baselines as function instances with start-up S",
        "",
        "Here the baselines run as the paper deploys them: one serverless function instance per workflow on a "
        "GPU, started when no live instance of the workflow is there (paying S, then its weight loads), scaled "
        "in after 60 s idle (the paper does not say; our choice), a WCache instance ending when its workflow is "
        "evicted; no warm wait. The trace is "
        "the paper's shape (`--trace-kind paper`: one tenant per workflow, each with its own bursts, nothing "
        "cut as warm-up), and Comfy Cluster preloads first layers into idle memory. The paper does not state S "
        '(its §2.3: scaling out a Flux1-Schnell workflow with Diffusers "takes 1.1 seconds even when loading from '
        f'pinned host memory"); the default, S = {d["default_s"]:g} s, is measured: {STARTUP_SOURCE}. '
        '"not reached": below 90 % at every swept rate, the lowest included (cold starts, not load, are what '
        "such a baseline misses by).",
        "",
        *headline(d, max_gpus),
        "",
        *_curves_at_default(d),
        f"Comfy Cluster: 90 % up to **{_fmt(ours_rate)} req/s**; at {d['plan_rate']:g} req/s it needs "
        f"**{ours_gpus if ours_gpus is not None else f'more than {max_gpus}'} GPUs**.",
        "",
        "| S (s) | MCache rate at 90 % | WCache | NoCache | Comfy Cluster / MCache | MCache GPUs at "
        f"{d['plan_rate']:g} req/s | MCache / Comfy Cluster GPUs |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Of the S swept ({swept} s), the smallest at which Comfy Cluster reaches twice MCache's rate: "
        + (f"**{need:g} s** ({_ratio(ours_rate, d['rate_at_90'][f'MCache@{need:g}'])})" if need is not None else "none")
        + f"; at which it needs at most half MCache's GPUs at {d['plan_rate']:g} req/s: "
        + (f"**{half:g} s**" if half is not None else "none")
        + f"; the measured default is {d['default_s']:g} s.",
        "",
        f"Memory use at {d['memory_rate']:g} req/s (1.5x the rate above; S = {mem_s:g} s) against the paper's "
        "Fig. 10e (S1 at rate scale 1.5): "
        + ", ".join(
            f"{n} {100 * mem[k]:.0f} % (paper {100 * PAPER_MEMORY[n]:.0f} %)"
            for n, k in (
                ("NoCache", f"NoCache@{mem_s:g}"),
                ("WCache", f"WCache@{mem_s:g}"),
                ("MCache", f"MCache@{mem_s:g}"),
                (OURS, OURS),
            )
        )
        + ".",
        "",
        "![](startup_sweep.png)",
        "",
    ]
