"""`comfy-cluster simulate`: replay a trace (generated or a CSV of time,tenant,workflow) on simulated
GPUs and print SLO attainment, latency, memory use, loads and the simulator's own overhead; with
`--find-gpus`, the fewest GPUs that meet a target attainment on that trace."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import replace

from cluster.scheduling.policies import POLICIES
from cluster.sim.experiments import fewest_gpus
from cluster.sim.gpu_profiles import GPUS
from cluster.sim.simulator import SYSTEMS, SimConfig, simulate
from cluster.sim.startup_sweep import DEFAULT_STARTUP_S, STARTUP_SOURCE
from cluster.sim.traces import TRACE_KINDS, TraceSpec, generate, read_csv, scale, write_csv
from cluster.sim.workflows import catalogue


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", help="CSV of time,tenant,workflow to replay (default: generate one)")
    p.add_argument("--rate-scale", type=float, default=1.0, help="replay the trace this many times faster")
    p.add_argument("--setting", choices=("s1", "s2"), default="s1", help="workflow catalogue")
    p.add_argument("--system", choices=SYSTEMS, default="ours")
    p.add_argument("--policy", choices=POLICIES, default=None, help="default: vtime for ours, fifo otherwise")
    p.add_argument("--slack", type=float, default=10.0, help="vTime fairness slack (seconds)")
    p.add_argument("--gpus", type=int, default=32)
    p.add_argument("--gpu", choices=sorted(GPUS), default="H800")
    p.add_argument("--slo-scale", type=float, default=3.0)
    p.add_argument("--duration", type=float, default=60.0, help="generated trace length (s)")
    p.add_argument("--rate", type=float, default=3.0, help="generated mean req/s")
    p.add_argument("--cov", type=float, default=1.0, help="generated inter-arrival CoV")
    p.add_argument("--tenants", type=int, default=4, help="tenants of a `mix` trace")
    p.add_argument(
        "--trace-kind",
        choices=TRACE_KINDS,
        default="mix",
        help="mix: tenants share one arrival process; paper: one bursty tenant per workflow (§8.1)",
    )
    p.add_argument(
        "--baseline-startup",
        type=float,
        default=DEFAULT_STARTUP_S,
        metavar="S",
        help="monolithic baselines run as function instances that pay S seconds to start (0: a shared "
        f"pool that starts nothing). Default {DEFAULT_STARTUP_S:g} s, measured by {STARTUP_SOURCE} "
        "(docs/simulator.md)",
    )
    p.add_argument("--keepalive", type=float, default=60.0, help="idle seconds before a function instance is scaled in")
    p.add_argument(
        "--preload",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="ours: preload the first L_e layers of requested models into idle memory (§5.1)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=float, default=0.0, help="leave requests arriving earlier out")
    p.add_argument(
        "--max-batch",
        type=int,
        default=1,
        help="ours: same-model invocations merged per run (1: no batching, the head's default)",
    )
    p.add_argument("--batch-window", type=float, default=0.0, help="seconds a batch that is not full waits for more")
    p.add_argument("--save-trace", help="write the (generated) trace to this CSV")
    p.add_argument(
        "--find-gpus",
        action="store_true",
        help="capacity planning: search the fewest GPUs that meet --target SLO attainment on this trace",
    )
    p.add_argument("--target", type=float, default=0.9, help="SLO attainment --find-gpus aims for")
    p.add_argument("--max-gpus", type=int, default=1024, help="--find-gpus gives up beyond this many")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="comfy-cluster simulate", description=__doc__.splitlines()[0])
    add_arguments(p)
    return run(p.parse_args(list(argv or [])))


def run(args: argparse.Namespace) -> int:
    workflows, profiles = catalogue(args.setting)
    names = [w.name for w in workflows]
    if args.trace:
        trace = read_csv(args.trace, known=names)
    else:
        trace = generate(
            TraceSpec(
                duration_s=args.duration,
                rate=args.rate,
                cov=args.cov,
                tenants=args.tenants,
                seed=args.seed,
                kind=args.trace_kind,
            ),
            names,
        )
    if args.rate_scale != 1.0:
        trace = scale(trace, args.rate_scale)
    if args.save_trace:
        write_csv(trace, args.save_trace)
    policy = args.policy or ("vtime" if args.system == "ours" else "fifo")
    cfg = SimConfig(
        gpus=args.gpus,
        gpu=GPUS[args.gpu],
        system=args.system,
        policy=policy,
        delta=args.slack,
        slo_scale=args.slo_scale,
        warmup_s=args.warmup,
        max_batch=args.max_batch,
        batch_window_s=args.batch_window,
        startup_s=args.baseline_startup,
        keepalive_s=args.keepalive,
        preload=args.preload,
    )
    if args.find_gpus:
        gpus, tried = fewest_gpus(
            lambda n: simulate(replace(cfg, gpus=n), trace, workflows, profiles).attainment, args.target, args.max_gpus
        )
        print(
            json.dumps(
                {
                    "system": args.system,
                    "policy": policy,
                    "gpu": args.gpu,
                    "requests": len(trace),
                    "target": args.target,
                    "gpus": gpus,
                    "tried": {n: round(a, 4) for n, a in sorted(tried.items())},
                },
                indent=1,
            )
        )
        return 0 if gpus is not None else 1
    result = simulate(cfg, trace, workflows, profiles)
    print(json.dumps(result.summary(), indent=1))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    # no options of its own, so every flag reaches `main` (simulate --help included)
    simulate = sub.add_parser("simulate", help="replay a trace on simulated GPUs", add_help=False, prefix_chars="+")
    simulate.add_argument("sim_args", nargs=argparse.REMAINDER)
    simulate.set_defaults(func=lambda args: main(args.sim_args))
