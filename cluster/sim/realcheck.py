"""`comfy-cluster bench realcheck`: the simulator's prediction against a real `serve` on the demo models.

1. Start `comfy-cluster serve --executors N --executor-threads T` (CPU, temporary workspace) and time
   each demo workflow alone over HTTP (median of a few runs after a warm-up).
2. Hand those solo times to the simulator as the profiles of a modelled cluster of N CPU executors:
   each workflow is one ModelFn whose compute time is its solo latency, weights already resident
   (the real executors keep them after the warm-up), deadline = SLO scale x solo.
3. Replay a scaled-down generated trace (two tenants, Gamma arrivals, Zipf popularity, offered load a
   fraction of the measured capacity) against the server, and simulate the same arrivals.

Three simulations are printed beside the real run, because the real server admits one prompt at a
time (its queue worker runs prompts in order; a prompt's ModelFns spread over the executors):
  sim, 1 prompt    the prediction: the server's admission (one request in service at a time), solo profiles
  sim, N prompts   the simulator as it models the design: requests share the N executors
  sim, replay svc  a calibration: the server's admission with each request's service time as measured
                   during the replay; it separates queueing-model error from profiling error
Figures: SLO attainment, p50/p95 latency, and the two tenants' service difference (seconds of
execution, the busier tenant minus the other, at the end and its largest value over time).
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from cluster.sim.engine import SimConfig, Simulator
from cluster.sim.profiles import GPUSpec, ModelProfile
from cluster.sim.realserver import RealRecord, RealServer, demo_prompts, measure_solo, replay
from cluster.sim.results import SimResult
from cluster.sim.traces import TraceRequest, TraceSpec, generate, read_csv, scale
from cluster.sim.workflows import Node, Workflow

DEFAULT_WORKFLOWS = ("text_to_image", "sdxl", "flux", "lora", "img2img", "controlnet")
# The demo models are a few MB; an executor's default memory budget is 8 GiB.
CPU_EXECUTOR = GPUSpec("cpu-executor", memory_gib=8.0, h2d_gbps=8.0, link_gbps=1.0, speed=1.0)
RESIDENT_LOAD_S = 1e-3   # weights stay resident after the warm-up: loading is (almost) free


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
        req = inv.payload[0]
        before = req.left
        super()._finish(ex, inv, measured)
        if before > 0 and req.left == 0:
            self._in_service -= 1
            if self._waiting:
                self._arrive(self._waiting.pop(0))


def model_catalogue(solo: dict[str, float]) -> tuple[list[Workflow], dict[str, ModelProfile]]:
    """Each demo workflow as one ModelFn whose compute time is its measured solo latency."""
    workflows = [Workflow(name, [Node("workflow", name, (), 0)]) for name in solo]
    profiles = {name: ModelProfile(name, RESIDENT_LOAD_S, 0.0, 0.01, s, layers=1) for name, s in solo.items()}
    return workflows, profiles


def simulate_replay(trace: Sequence[TraceRequest], solo: dict[str, float], executors: int,
                    max_running: int | None, slo_scale: float = 3.0) -> SimResult:
    workflows, profiles = model_catalogue(solo)
    # vTime with the head's default slack; no waiting for a warm executor (the real head has none)
    cfg = SimConfig(gpus=executors, gpu=CPU_EXECUTOR, system="ours", policy="vtime", delta=1.0,
                    slo_scale=slo_scale, record_service=True, wait_for_warm=False)
    return AdmittingSimulator(cfg, workflows, profiles, max_running).run(trace)


def simulate_measured_service(records: Sequence[RealRecord], solo: dict[str, float], executors: int,
                              max_running: int | None, slo_scale: float = 3.0) -> list[tuple]:
    """The same simulation with each request's own service time from the replay (solo for those that
    failed) in place of its workflow's solo profile: what is left between this and the real run is
    the model of queueing and dispatch, not the profiles. Rows for `_figures`, deadlines from solo."""
    own = {f"{r.workflow}@{i}": (r.service_s if r.ok and r.service_s > 0 else solo[r.workflow])
           for i, r in enumerate(records)}
    arrivals = [TraceRequest(r.arrival, r.tenant, f"{r.workflow}@{i}") for i, r in enumerate(records)]
    result = simulate_replay(arrivals, own, executors, max_running, slo_scale)
    return [(q.arrival, q.finish, q.arrival + slo_scale * solo[r.workflow], q.tenant, q.compute_s + q.load_s)
            for q, r in zip(result.requests, records)]


def make_trace(workflows: Sequence[str], solo: dict[str, float], requests: int, load: float, cov: float,
               seed: int) -> list[TraceRequest]:
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
    gap_end_s: float        # service of tenant a minus tenant b when the last request finished
    gap_max_s: float        # largest |difference| over the run

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


def real_figures(records: Sequence[RealRecord], solo: dict[str, float], slo_scale: float,
                 tenants: tuple[str, str]) -> Figures:
    return _figures([(r.arrival, r.finish, r.arrival + slo_scale * solo[r.workflow], r.tenant, r.service_s)
                     for r in records], tenants)


def sim_figures(result: SimResult, tenants: tuple[str, str]) -> Figures:
    # one ModelFn per request: a request's service is its invocation's time
    return _figures([(r.arrival, r.finish, r.deadline, r.tenant, r.compute_s + r.load_s) for r in result.requests],
                    tenants)


def check(args: argparse.Namespace, log=print) -> dict:
    """Run the whole check; returns every figure (JSON-ready)."""
    t_start = time.monotonic()
    prompts = demo_prompts(args.workflows)
    with RealServer(args.executors, args.threads, args.workspace, args.server_cache) as server:
        log(f"serve up on {server.url} ({args.executors} executors x {args.threads} thread) "
            f"after {time.monotonic() - t_start:.0f} s")
        solo, failed = measure_solo(server, prompts, args.solo_repeats, args.seed)
        for name, err in failed.items():
            log(f"left out {name}: it fails alone ({err})")
        if not solo:
            raise RuntimeError("no workflow runs on this server")
        prompts = {name: prompts[name] for name in solo}
        log("solo latency (s): " + ", ".join(f"{k} {v:.3f}" for k, v in solo.items()))
        if args.trace:
            trace = read_csv(args.trace, known=list(prompts))
            if args.rate_scale != 1.0:
                trace = scale(trace, args.rate_scale)
        else:
            trace = make_trace(list(prompts), solo, args.requests, args.load, args.cov, args.seed)
        trace = [r for r in trace if r.time <= args.max_trace_s]
        if not trace:
            raise ValueError("the trace has no request within --max-trace-s")
        log(f"replaying {len(trace)} requests over {trace[-1].time:.1f} s "
            f"({len({r.tenant for r in trace})} tenants)")
        records = replay(server, prompts, trace, args.seed, args.drain_timeout)
    tenants = _tenant_pair(trace)
    # the simulator gets the arrivals as they reached the server
    arrivals = [TraceRequest(r.arrival, r.tenant, r.workflow) for r in records]
    real = real_figures(records, solo, args.slo_scale, tenants)
    one = sim_figures(simulate_replay(arrivals, solo, args.executors, 1, args.slo_scale), tenants)
    many = sim_figures(simulate_replay(arrivals, solo, args.executors, None, args.slo_scale), tenants)
    measured = _figures(simulate_measured_service(records, solo, args.executors, 1, args.slo_scale), tenants)
    return {"executors": args.executors, "threads": args.threads, "slo_scale": args.slo_scale,
            "tenants": tenants, "solo_s": solo, "left_out": failed, "requests": len(trace), "trace_s": trace[-1].time,
            "failed": sum(not r.ok for r in records), "wall_s": time.monotonic() - t_start,
            "real": real.as_dict(), "sim_one_prompt": one.as_dict(), "sim_concurrent": many.as_dict(),
            "sim_measured_service": measured.as_dict(),
            "service_drift": service_drift(records, solo),
            "records": [r.__dict__ for r in records],
            "p50_ratio_one_prompt": _ratio(real.p50_s, one.p50_s),
            "p50_ratio_concurrent": _ratio(real.p50_s, many.p50_s),
            "p50_ratio_measured_service": _ratio(real.p50_s, measured.p50_s)}


def service_drift(records: Sequence[RealRecord], solo: dict[str, float]) -> float:
    """Mean execution time on the server during the replay over the mean solo latency of the same
    requests: above 1 the server ran slower under the trace than alone (noise from other work on the
    machine, contention), which the simulator, fed the solo times, cannot know."""
    done = [r for r in records if r.ok]
    if not done:
        return float("nan")
    return float(np.mean([r.service_s for r in done]) / np.mean([solo[r.workflow] for r in done]))


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
    n = d["executors"]
    cols = (("real", "real", None), ("sim, 1 prompt", "sim_one_prompt", "p50_ratio_one_prompt"),
            (f"sim, {n} prompts", "sim_concurrent", "p50_ratio_concurrent"),
            ("sim, replay svc", "sim_measured_service", "p50_ratio_measured_service"))
    rows = [("requests completed", "completed", "{:.0f}"), ("SLO attainment (3x solo)", "attainment", "{:.3f}"),
            ("p50 latency (s)", "p50_s", "{:.3f}"), ("p95 latency (s)", "p95_s", "{:.3f}"),
            ("service gap end (s)", "gap_end_s", "{:+.3f}"), ("max |service gap| (s)", "gap_max_s", "{:.3f}")]
    lines = [f"{'':28}" + "".join(f"{label:>17}" for label, _, _ in cols)]
    for label, key, fmt in rows:
        lines.append(f"{label:28}" + "".join(f"{fmt.format(d[col][key]):>17}" for _, col, _ in cols))
    lines.append(f"{'p50 real / sim':28}{'':>17}" + "".join(f"{d[r]:>17.3f}" for _, _, r in cols[1:]))
    lines.append(f"mean service in the replay / solo latency of the same requests: {d['service_drift']:.3f}")
    verdict = "within" if abs(d["p50_ratio_one_prompt"] - 1) <= 0.25 else "outside"
    lines.append(f"p50 agreement with the simulator (server's admission, solo profiles): {verdict} 25 %")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="comfy-cluster bench realcheck", description=__doc__.splitlines()[0])
    p.add_argument("--executors", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch threads per executor")
    p.add_argument("--workflows", nargs="+", default=list(DEFAULT_WORKFLOWS),
                   help="workflows_json/<name>.json to use (cascade is left out by default: its latency "
                        "depends on the discriminator's per-seed decision)")
    p.add_argument("--requests", type=int, default=60, help="about this many requests in the generated trace")
    p.add_argument("--load", type=float, default=0.6,
                   help="offered load: arrival rate over the rate one-prompt-at-a-time serving sustains")
    p.add_argument("--cov", type=float, default=1.0, help="inter-arrival CoV of the generated trace")
    p.add_argument("--trace", help="replay this CSV (time,tenant,workflow; workflow = a demo workflow name)")
    p.add_argument("--rate-scale", type=float, default=1.0, help="replay --trace this many times faster")
    p.add_argument("--max-trace-s", type=float, default=150.0, help="drop requests arriving later than this")
    p.add_argument("--drain-timeout", type=float, default=90.0, help="wait this long after the last arrival")
    p.add_argument("--solo-repeats", type=int, default=5)
    p.add_argument("--slo-scale", type=float, default=3.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workspace", help="serve this workspace (default: a temporary one)")
    p.add_argument("--server-cache", choices=("none", "classic"), default="none",
                   help="the server's output cache; none makes every request compute what solo timed")
    p.add_argument("--json", help="also write the figures to this file")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(list(argv or []))
    d = check(args)
    print(f"realcheck: {d['requests']} requests over {d['trace_s']:.1f} s, tenants {d['tenants'][0]} "
          f"(a) and {d['tenants'][1]} (b), {d['failed']} failed, {d['wall_s']:.0f} s wall")
    print(format_table(d))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(d, f, indent=1)
    return 0
