"""`comfy-cluster bench NAME`: every benchmark, grouped by the layer it measures (cluster/bench: dispatch,
data plane, cascades; comfy_bridge/bench: the engine, whole workflows, batching, tenants under load,
cold starts, a monolithic Diffusers instance's start-up, images per second against a running ComfyUI, one
image's CFG split across two executors; cluster/sim: the simulator's report and its check against a real server)."""

from __future__ import annotations

import argparse
import importlib

BENCHMARKS = {
    "engine": "comfy_bridge.bench.engine",
    "dispatch": "cluster.bench.dispatch",
    "dataplane": "cluster.bench.dataplane",
    "cluster": "comfy_bridge.bench.workflow",
    "cascade": "cluster.bench.cascade",
    "batching": "comfy_bridge.bench.batching",
    "report": "cluster.sim.report",
    "realcheck": "cluster.sim.realcheck",
    "tenants-load": "comfy_bridge.bench.tenants_load",
    "coldstart": "comfy_bridge.bench.coldstart",
    "startup": "comfy_bridge.bench.startup",
    "throughput": "comfy_bridge.bench.throughput",
    "cfg-split": "comfy_bridge.bench.cfg_split",
}


def cmd_bench(args: argparse.Namespace) -> int:
    return importlib.import_module(BENCHMARKS[args.name]).main(args.bench_args)


def add_parser(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser("bench", help="run a benchmark and print its figures")
    bench.add_argument("name", choices=sorted(BENCHMARKS))
    bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    bench.set_defaults(func=cmd_bench)
