"""Dispatch overhead and scheduler throughput.

    python -m cluster.bench.dispatch [--calls 300] [--transport tcp|ipc]

1. Per-invocation overhead on loopback: a no-op ModelFn called back to back through a head and one
   executor process; latency is the whole ClusterRuntime.call and overhead is that minus the
   executor's own wall time. Measured twice: with no tensor (the control plane alone: submit,
   decision, ZeroMQ round trip, completion) and with a 1x4x8x8 float tensor in and out (adding the
   shared-memory write, the executor's read and write and the caller's read).
2. Scheduler decisions per second with 1,000 ready invocations from 100 tenants, for each policy:
   draining them (pops only), and in a steady state where every decision is followed by its
   completion and a new arrival, so 1,000 stay ready.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from typing import Any

import torch

from cluster.bench import results
from cluster.call import NoParams
from cluster.modelfn import ModelFn, register
from cluster.refs import ModelRef
from cluster.scheduling.policies import POLICIES, make_scheduler
from cluster.scheduling.tenant_scheduler import Invocation


@register
class Noop(ModelFn):
    name = "bench_noop"

    def setup_io(self) -> None:
        self.add_input("x")
        self.add_output("y")

    def load_model(self, ref: ModelRef) -> None:
        return None

    def execute(self, model: Any, inputs: dict[str, Any], params: NoParams) -> dict[str, torch.Tensor | None]:
        return {"y": inputs["x"]}


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


WARMUP = 20  # first calls pay for imports and first touches of the sockets


async def _latencies(rt, n: int, tensor: bool = True) -> list[float]:
    x = torch.zeros(1, 4, 8, 8) if tensor else None
    latency = []
    for _ in range(n + WARMUP):
        t0 = time.perf_counter()
        await rt.call("bench_noop", None, {"x": x}, {})
        latency.append(time.perf_counter() - t0)
    return latency[WARMUP:]


def bench_dispatch(n: int, transport: str, tensor: bool = True) -> dict[str, Any]:
    from cluster.executor.local_cluster import start_local_cluster

    address = "tcp://127.0.0.1:0" if transport == "tcp" else None
    head, rt = start_local_cluster(1, preload=["cluster.bench.dispatch"], address=address, tick_s=0.05)
    try:
        # the executor's own wall time per call, taken from the completions the head handles
        walls: list[float] = []
        head.completion_listeners.append(lambda msg: walls.append(msg.wall_s))
        latency = asyncio.run(_latencies(rt, n, tensor))
        walls = walls[WARMUP:]
        overhead = [lat - w for lat, w in zip(latency, walls)]
        return {
            "calls": n,
            "latency_median_ms": statistics.median(latency) * 1e3,
            "latency_p99_ms": percentile(latency, 0.99) * 1e3,
            "overhead_median_ms": statistics.median(overhead) * 1e3,
            "overhead_p99_ms": percentile(overhead, 0.99) * 1e3,
            "latency_ms": [x * 1e3 for x in latency],
            "overhead_ms": [x * 1e3 for x in overhead],
        }
    finally:
        head.stop()


def bench_scheduler(policy: str, invocations: int = 1000, tenants: int = 100, rounds: int = 5) -> float:
    """Decisions per second popping `invocations` ready ones from `tenants` tenants (best of rounds)."""
    best = float("inf")
    rng = random.Random(0)
    for _ in range(rounds):
        sched = make_scheduler(policy, delta=0.5)  # the slack means something to vtime only
        for i in range(invocations):
            sched.push(
                Invocation(
                    id=i,
                    tenant=f"t{i % tenants}",
                    request=f"r{i}",
                    fn="f",
                    model_key="m",
                    estimate=rng.uniform(0.01, 1.0),
                    remaining=rng.uniform(0, 5),
                )
            )
        t0 = time.perf_counter()
        while sched.pop() is not None:
            pass
        best = min(best, time.perf_counter() - t0)
        assert sched.decisions == invocations
    return invocations / best


def bench_steady(
    policy: str, invocations: int = 1000, tenants: int = 100, decisions: int = 10_000, rounds: int = 3
) -> float:
    """Decisions per second with `invocations` always ready: each decision is followed by the
    completion of the dispatched invocation and a new arrival from the same tenant (timed too).
    Best of `rounds`, like the draining figure: on a shared machine the slowest rounds measure the
    neighbours."""
    best = 0.0
    for r in range(rounds):
        rng = random.Random(1 + r)
        sched = make_scheduler(policy, delta=0.5)  # the slack means something to vtime only

        def arrival(i: int, tenant: str) -> Invocation:
            return Invocation(
                id=i,
                tenant=tenant,
                request=f"r{i}",
                fn="f",
                model_key="m",
                estimate=rng.uniform(0.01, 1.0),
                remaining=rng.uniform(0, 5),
            )

        for i in range(invocations):
            sched.push(arrival(i, f"t{i % tenants}"))
        t0 = time.perf_counter()
        for i in range(decisions):
            inv = sched.pop()
            sched.complete(inv, inv.estimate * 1.1)
            sched.push(arrival(invocations + i, inv.tenant))
        best = max(best, decisions / (time.perf_counter() - t0))
    return best


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m cluster.bench.dispatch", description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--transport", choices=("tcp", "ipc"), default="tcp")
    p.add_argument("--skip-dispatch", action="store_true", help="only the scheduler benchmark")
    args = p.parse_args(argv)
    record = results.begin("dispatch", argv)
    figure: dict = {"scheduler": {}}
    for policy in POLICIES:
        draining, steady = bench_scheduler(policy), bench_steady(policy)
        figure["scheduler"][policy] = {"draining_per_s": draining, "steady_per_s": steady}
        print(
            f"scheduler {policy:5s}: {draining:10,.0f} decisions/s draining 1,000 ready "
            f"invocations of 100 tenants; {steady:10,.0f} decisions/s with 1,000 kept ready "
            f"(pop + complete + new arrival)"
        )
    if not args.skip_dispatch:
        for tensor, what in ((False, "control plane only"), (True, "with a 256-byte tensor in and out")):
            r = bench_dispatch(args.calls, args.transport, tensor)
            figure["tensor" if tensor else "control_plane"] = r
            print(
                f"dispatch over {args.transport} loopback, {r['calls']} no-op calls, {what}: "
                f"latency median {r['latency_median_ms']:.3f} ms, p99 {r['latency_p99_ms']:.3f} ms; "
                f"overhead (minus executor run time) median {r['overhead_median_ms']:.3f} ms, "
                f"p99 {r['overhead_p99_ms']:.3f} ms"
            )
    # each call's latency and overhead are the rounds; the figure keeps the summaries
    rounds = {
        k: {"latency_ms": figure[k].pop("latency_ms"), "overhead_ms": figure[k].pop("overhead_ms")}
        for k in ("control_plane", "tensor")
        if k in figure
    }
    record.write(rounds, figure, config=vars(args))


if __name__ == "__main__":
    main()
