"""`comfy-cluster bench realcheck`: the simulator's prediction against a real `serve` on the demo models.

1. Start `comfy-cluster serve --executors N --executor-threads T --concurrent-prompts P` (CPU, temporary
   workspace) and time each demo workflow alone on that server right before the replay: a discarded
   warm-up each (weights load and stay resident), then rounds over all workflows, median of the
   repetitions. Each run is split by the server's own timestamps into admission (submission to
   execution_start: HTTP, validation, the queue worker picking it up) and service (execution_start to
   execution_success: the orchestrator and its ModelFns on the executors). The client polls as
   sparsely as during the replay, so the machine carries the same load.
2. Hand those profiles to the simulator as the server runs them: a request enters the prompt queue
   after its admission time, at most P prompts are in service (the queue worker's orchestrators, FIFO),
   and a prompt in service takes its workflow's service time. With P = 1 a prompt's ModelFns run one
   after another (the orchestrator waits for each), so its measured service already holds its ModelFn
   split and the tensor moves between executors; weights are resident (no loading).
3. Replay a scaled-down generated trace (two tenants, Gamma arrivals, Zipf popularity, offered load a
   fraction of the measured capacity) against the server, simulate the same arrivals, then time the
   workflows alone once more (the profile drift over the run says how steady the machine was).

Columns beside the real run:
  sim, P prompts     the prediction: the server's admission with the solo profiles measured before
  sim, N prompts     N = executors requests in service at once, each on one executor (what the design
                     allows with more orchestrators; with P = N it is the prediction)
  sim, replay svc    a calibration: the server's admission with each request's service time as measured
                     during the replay; it separates queueing-model error from profiling error
Figures: SLO attainment, p50/p95 latency, and the two tenants' service difference (seconds of
execution, the busier tenant minus the other, at the end and its largest value over time).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cluster.bench import results
from cluster.sim.gpu_profiles import GPUSpec, ModelProfile
from cluster.sim.realserver import RealRecord, RealServer, SoloTiming, demo_prompts, measure_solo, replay
from cluster.sim.simulator import SimConfig, Simulator
from cluster.sim.traces import TraceRequest, TraceSpec, generate, read_csv, scale
from cluster.sim.workflows import SimNode, Workflow

DEFAULT_WORKFLOWS = ("text_to_image", "sdxl", "flux", "lora", "img2img", "controlnet")
# The demo models are a few MB; an executor's default memory budget is 8 GiB.
CPU_EXECUTOR = GPUSpec("cpu-executor", memory_gib=8.0, h2d_gbps=8.0, link_gbps=1.0, speed=1.0)
RESIDENT_LOAD_S = 1e-3  # weights stay resident after the warm-up: loading is (almost) free


class AdmittingSimulator(Simulator):
    """The simulator with at most `max_running` requests in service; later ones wait in FIFO order,
    as prompts wait in the server's queue."""

    def __init__(self, cfg: SimConfig, workflows, profiles, max_running: int | None) -> None:
        super().__init__(cfg, workflows, profiles)
        self.max_running = max_running
        self._in_service = 0
        self._waiting: list = []

    def _arrive(self, req) -> None:
        if self.max_running is not None and self._in_service >= self.max_running:
            self._waiting.append(req)
            return
        self._in_service += 1
        super()._arrive(req)

    def _finish(self, ex, inv, measured: float) -> None:
        req = inv.payload.request
        before = req.left
        super()._finish(ex, inv, measured)
        if before > 0 and req.left == 0:
            self._in_service -= 1
            if self._waiting:
                self._arrive(self._waiting.pop(0))


def model_catalogue(solo: dict[str, float]) -> tuple[list[Workflow], dict[str, ModelProfile]]:
    """Each demo workflow as one ModelFn whose compute time is its measured solo latency."""
    workflows = [Workflow(name, [SimNode("workflow", name, (), 0)]) for name in solo]
    profiles = {name: ModelProfile(name, RESIDENT_LOAD_S, 0.0, 0.01, s, layers=1) for name, s in solo.items()}
    return workflows, profiles


def simulate_replay(
    trace: Sequence[TraceRequest],
    solo: dict[str, SoloTiming],
    executors: int,
    max_running: int | None,
    slo_scale: float = 3.0,
    service: Sequence[float] | None = None,
) -> list[tuple]:
    """The server as modelled: request i reaches the prompt queue `admit_s` after it arrives, at most
    `max_running` prompts are in service (FIFO), each takes its workflow's solo service time (or
    `service[i]`, the calibration). Rows for `_figures`: (arrival, finish, deadline, tenant, service),
    deadline = arrival + SLO scale x solo latency (admission + service)."""
    own = {
        f"{r.workflow}@{i}": (service[i] if service is not None else solo[r.workflow].service_s)
        for i, r in enumerate(trace)
    }
    queued = [
        TraceRequest(r.time + solo[r.workflow].admit_s, r.tenant, f"{r.workflow}@{i}") for i, r in enumerate(trace)
    ]
    workflows, profiles = model_catalogue(own)
    # vTime with the head's default slack; no waiting for a warm executor (weights stay resident)
    cfg = SimConfig(
        gpus=executors,
        gpu=CPU_EXECUTOR,
        system="ours",
        policy="vtime",
        delta=1.0,
        slo_scale=slo_scale,
        record_service=True,
        wait_for_warm=False,
    )
    result = AdmittingSimulator(cfg, workflows, profiles, max_running).run(queued)
    return [
        (r.time, q.finish, r.time + slo_scale * solo[r.workflow].latency_s, r.tenant, q.compute_s + q.load_s)
        for r, q in zip(trace, result.requests)
    ]


def simulate_measured_service(
    records: Sequence[RealRecord],
    solo: dict[str, SoloTiming],
    executors: int,
    max_running: int | None,
    slo_scale: float = 3.0,
) -> list[tuple]:
    """The same simulation with each request's own service time from the replay (the solo one for
    those that failed) in place of its workflow's solo profile: what is left between this and the real
    run is the model of admission and queueing, not the profiles."""
    arrivals = [TraceRequest(r.arrival, r.tenant, r.workflow) for r in records]
    service = [r.service_s if r.ok and r.service_s > 0 else solo[r.workflow].service_s for r in records]
    return simulate_replay(arrivals, solo, executors, max_running, slo_scale, service)


def make_trace(
    workflows: Sequence[str], solo: dict[str, float], requests: int, load: float, cov: float, seed: int
) -> list[TraceRequest]:
    """About `requests` arrivals from two tenants at `load` x the rate one-prompt-at-a-time serving sustains."""
    raw = generate(TraceSpec(duration_s=float(requests), rate=1.0, cov=cov, tenants=2, seed=seed), list(workflows))
    mean_service = float(np.mean([solo[r.workflow] for r in raw]))
    return scale(raw, load / mean_service)


@dataclass(frozen=True)
class Figures:
    requests: int
    completed: int
    attainment: float
    p50_s: float
    p95_s: float
    gap_end_s: float  # service of tenant a minus tenant b when the last request finished
    gap_max_s: float  # largest |difference| over the run

    def as_dict(self) -> dict:
        return self.__dict__.copy()


def _figures(rows: list[tuple[float, float | None, float, str, float]], tenants: tuple[str, str]) -> Figures:
    """rows: (arrival, finish or None, deadline, tenant, service seconds)."""
    lat = [f - a for a, f, *_ in rows if f is not None]
    met = sum(f is not None and f <= d + 1e-9 for a, f, d, *_ in rows)
    events = sorted((f, t, s) for a, f, d, t, s in rows if f is not None)
    gap, worst = 0.0, 0.0
    for _, tenant, s in events:
        gap += s if tenant == tenants[0] else -s if tenant == tenants[1] else 0.0
        worst = max(worst, abs(gap))
    pct = (lambda q: float(np.percentile(lat, q))) if lat else (lambda q: float("nan"))
    return Figures(len(rows), len(lat), met / len(rows) if rows else 1.0, pct(50), pct(95), gap, worst)


def real_figures(
    records: Sequence[RealRecord], solo: dict[str, SoloTiming], slo_scale: float, tenants: tuple[str, str]
) -> Figures:
    return _figures(
        [
            (r.arrival, r.finish, r.arrival + slo_scale * solo[r.workflow].latency_s, r.tenant, r.service_s)
            for r in records
        ],
        tenants,
    )


def check(args: argparse.Namespace, log=print) -> dict:
    """Run the whole check; returns every figure (JSON-ready)."""
    t_start = time.monotonic()
    prompts = demo_prompts(args.workflows)
    p = args.concurrent_prompts
    with RealServer(args.executors, args.threads, args.workspace, args.server_cache, concurrent_prompts=p) as server:
        log(
            f"serve up on {server.url} ({args.executors} executors x {args.threads} thread, {p} concurrent "
            f"prompt(s)) after {time.monotonic() - t_start:.0f} s"
        )
        solo, failed = measure_solo(server, prompts, args.solo_repeats, args.seed)
        for name, err in failed.items():
            log(f"left out {name}: it fails alone ({err})")
        if not solo:
            raise RuntimeError("no workflow runs on this server")
        prompts = {name: prompts[name] for name in solo}
        log(
            "solo admission + service (s): "
            + ", ".join(f"{k} {v.admit_s:.3f}+{v.service_s:.3f}" for k, v in solo.items())
        )
        latency = {k: v.latency_s for k, v in solo.items()}
        if args.trace:
            trace = read_csv(args.trace, known=list(prompts))
            if args.rate_scale != 1.0:
                trace = scale(trace, args.rate_scale)
        else:
            trace = make_trace(list(prompts), latency, args.requests, args.load, args.cov, args.seed)
        trace = [r for r in trace if r.time <= args.max_trace_s]
        if not trace:
            raise ValueError("the trace has no request within --max-trace-s")
        log(f"replaying {len(trace)} requests over {trace[-1].time:.1f} s ({len({r.tenant for r in trace})} tenants)")
        records = replay(server, prompts, trace, args.seed, args.drain_timeout)
        after, _ = measure_solo(server, prompts, max(1, args.solo_repeats // 2), args.seed + 1)
    tenants = _tenant_pair(trace)
    # the simulator gets the arrivals as they reached the server
    arrivals = [TraceRequest(r.arrival, r.tenant, r.workflow) for r in records]
    real = real_figures(records, solo, args.slo_scale, tenants)
    pred = _figures(simulate_replay(arrivals, solo, args.executors, p, args.slo_scale), tenants)
    many = _figures(simulate_replay(arrivals, solo, args.executors, args.executors, args.slo_scale), tenants)
    measured = _figures(simulate_measured_service(records, solo, args.executors, p, args.slo_scale), tenants)
    return {
        "executors": args.executors,
        "threads": args.threads,
        "concurrent_prompts": p,
        "slo_scale": args.slo_scale,
        "tenants": tenants,
        "solo": {k: v.__dict__ for k, v in solo.items()},
        "solo_after": {k: v.__dict__ for k, v in after.items()},
        "solo_s": latency,
        "left_out": failed,
        "requests": len(trace),
        "trace_s": trace[-1].time,
        "failed": sum(not r.ok for r in records),
        "wall_s": time.monotonic() - t_start,
        "real": real.as_dict(),
        "sim_prediction": pred.as_dict(),
        "sim_concurrent": many.as_dict(),
        "sim_measured_service": measured.as_dict(),
        "service_drift": service_drift(records, solo),
        "profile_drift": profile_drift(solo, after),
        "records": [r.__dict__ for r in records],
        "p50_ratio_prediction": _ratio(real.p50_s, pred.p50_s),
        "p50_ratio_concurrent": _ratio(real.p50_s, many.p50_s),
        "p50_ratio_measured_service": _ratio(real.p50_s, measured.p50_s),
    }


def service_drift(records: Sequence[RealRecord], solo: dict[str, SoloTiming]) -> float:
    """Mean service time on the server during the replay over the mean solo service time of the same
    requests: away from 1 the server ran at another speed under the trace than alone (other work on
    the machine, contention), which the simulator, fed the solo times, cannot know."""
    done = [r for r in records if r.ok]
    if not done:
        return float("nan")
    return float(np.mean([r.service_s for r in done]) / np.mean([solo[r.workflow].service_s for r in done]))


def profile_drift(before: dict[str, SoloTiming], after: dict[str, SoloTiming]) -> float:
    """Mean solo service time measured after the replay over the one measured before it (same
    workflows): how steady the machine was over the check."""
    common = [k for k in before if k in after]
    if not common:
        return float("nan")
    return float(np.mean([after[k].service_s for k in common]) / np.mean([before[k].service_s for k in common]))


def _tenant_pair(trace: Sequence[TraceRequest]) -> tuple[str, str]:
    """The two busiest tenants, busiest first."""
    counts: dict[str, int] = {}
    for r in trace:
        counts[r.tenant] = counts.get(r.tenant, 0) + 1
    ranked = sorted(counts, key=lambda t: (-counts[t], t)) + ["-", "-"]
    return ranked[0], ranked[1]


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 and np.isfinite(a) and np.isfinite(b) else float("nan")


def format_table(d: dict) -> str:
    n, p = d["executors"], d["concurrent_prompts"]
    cols = (
        ("real", "real", None),
        (f"sim, {p} prompt(s)", "sim_prediction", "p50_ratio_prediction"),
        (f"sim, {n} prompts", "sim_concurrent", "p50_ratio_concurrent"),
        ("sim, replay svc", "sim_measured_service", "p50_ratio_measured_service"),
    )
    rows = [
        ("requests completed", "completed", "{:.0f}"),
        ("SLO attainment (3x solo)", "attainment", "{:.3f}"),
        ("p50 latency (s)", "p50_s", "{:.3f}"),
        ("p95 latency (s)", "p95_s", "{:.3f}"),
        ("service gap end (s)", "gap_end_s", "{:+.3f}"),
        ("max |service gap| (s)", "gap_max_s", "{:.3f}"),
    ]
    lines = [f"{'':28}" + "".join(f"{label:>17}" for label, _, _ in cols)]
    for label, key, fmt in rows:
        lines.append(f"{label:28}" + "".join(f"{fmt.format(d[col][key]):>17}" for _, col, _ in cols))
    lines.append(f"{'p50 real / sim':28}{'':>17}" + "".join(f"{d[r]:>17.3f}" for _, _, r in cols[1:]))
    lines.append(f"mean service in the replay / solo service of the same requests: {d['service_drift']:.3f}")
    lines.append(f"solo service after the replay / before it: {d['profile_drift']:.3f}")
    verdict = "within" if abs(d["p50_ratio_prediction"] - 1) <= 0.25 else "outside"
    lines.append(f"p50 agreement with the simulator's prediction (server's admission, solo profiles): {verdict} 25 %")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="comfy-cluster bench realcheck", description=__doc__.splitlines()[0])
    p.add_argument("--executors", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch threads per executor")
    p.add_argument(
        "--concurrent-prompts",
        type=int,
        default=1,
        help="the server's --concurrent-prompts (orchestrators running prompts at once)",
    )
    p.add_argument(
        "--workflows",
        nargs="+",
        default=list(DEFAULT_WORKFLOWS),
        help="workflows_json/<name>.json to use (cascade is left out by default: its latency "
        "depends on the discriminator's per-seed decision)",
    )
    p.add_argument("--requests", type=int, default=60, help="about this many requests in the generated trace")
    p.add_argument(
        "--load",
        type=float,
        default=0.6,
        help="offered load: arrival rate over the rate one-prompt-at-a-time serving sustains",
    )
    p.add_argument("--cov", type=float, default=1.0, help="inter-arrival CoV of the generated trace")
    p.add_argument("--trace", help="replay this CSV (time,tenant,workflow; workflow = a demo workflow name)")
    p.add_argument("--rate-scale", type=float, default=1.0, help="replay --trace this many times faster")
    p.add_argument("--max-trace-s", type=float, default=150.0, help="drop requests arriving later than this")
    p.add_argument("--drain-timeout", type=float, default=90.0, help="wait this long after the last arrival")
    p.add_argument(
        "--solo-repeats", type=int, default=5, help="rounds of solo runs before the replay (half as many after)"
    )
    p.add_argument("--slo-scale", type=float, default=3.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workspace", help="serve this workspace (default: a temporary one)")
    p.add_argument(
        "--server-cache",
        choices=("none", "classic"),
        default="none",
        help="the server's output cache; none makes every request compute what solo timed",
    )
    p.add_argument("--json", help="also write the figures to this file")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(list(argv or []))
    record = results.begin("realcheck", argv)
    d = check(args)
    print(
        f"realcheck: {d['requests']} requests over {d['trace_s']:.1f} s, tenants {d['tenants'][0]} "
        f"(a) and {d['tenants'][1]} (b), {d['failed']} failed, {d['wall_s']:.0f} s wall"
    )
    print(format_table(d))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(d, f, indent=1)
    # each request the real server served is a round; the figure is the rest
    record.write(d["records"], {k: v for k, v in d.items() if k != "records"}, config=vars(args))
    return 0
