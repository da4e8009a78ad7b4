"""`comfy-cluster simulate`: replay a trace (generated or a CSV of time,tenant,workflow) on simulated
GPUs and print SLO attainment, latency, memory use, loads and the simulator's own overhead."""
from __future__ import annotations

import argparse
import json
from typing import Sequence

from cluster.scheduler import POLICIES
from cluster.sim.engine import SYSTEMS, SimConfig, simulate
from cluster.sim.profiles import GPUS
from cluster.sim.traces import TraceSpec, generate, read_csv, scale, write_csv
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
    p.add_argument("--tenants", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=float, default=0.0, help="leave requests arriving earlier out")
    p.add_argument("--save-trace", help="write the (generated) trace to this CSV")


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
        trace = generate(TraceSpec(duration_s=args.duration, rate=args.rate, cov=args.cov,
                                   tenants=args.tenants, seed=args.seed), names)
    if args.rate_scale != 1.0:
        trace = scale(trace, args.rate_scale)
    if args.save_trace:
        write_csv(trace, args.save_trace)
    policy = args.policy or ("vtime" if args.system == "ours" else "fifo")
    cfg = SimConfig(gpus=args.gpus, gpu=GPUS[args.gpu], system=args.system, policy=policy, delta=args.slack,
                    slo_scale=args.slo_scale, warmup_s=args.warmup)
    result = simulate(cfg, trace, workflows, profiles)
    print(json.dumps(result.summary(), indent=1))
    return 0
