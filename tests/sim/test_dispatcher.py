"""One dispatch policy (cluster.scheduling.dispatcher): the head and the simulator drive the same module, and the
simulator batches with it."""

from __future__ import annotations

import heapq

import pytest

from cluster.control.head import Head
from cluster.scheduling.dispatcher import Dispatcher
from cluster.scheduling.policies import make_scheduler
from cluster.scheduling.tenant_scheduler import Invocation
from cluster.scheduling.warm_wait import WarmWaitPolicy
from cluster.sim.gpu_profiles import ModelProfile
from cluster.sim.simulator import SimConfig, Simulator, simulate
from cluster.sim.traces import TraceRequest
from cluster.sim.workflows import SimNode, Workflow


def _one_step(models: tuple[str, ...] = ("m",)) -> tuple[list[Workflow], dict[str, ModelProfile]]:
    # weights that load in no time: placement, not the layer cache, decides where each step runs
    profiles = {k: ModelProfile(k, 0.0, 0.0, 1.0, 1.0, layers=1) for k in models}
    return [Workflow(f"w{k}", [SimNode("step", k, (), 0)]) for k in models], profiles


def test_the_head_and_the_simulator_hold_the_same_dispatcher():
    workflows, profiles = _one_step()
    assert type(Head().dispatcher) is Dispatcher
    assert type(Simulator(SimConfig(gpus=1), workflows, profiles).dispatcher) is Dispatcher


class _Gpu:
    def __init__(self, i: int) -> None:
        self.id, self.cached_models, self.draining, self.busy_until, self.busy = f"gpu{i:04d}", set(), False, 0.0, False

    @property
    def load(self) -> int:
        return int(self.busy)

    def free_in(self, now: float) -> float:
        return max(0.0, self.busy_until - now)


class _NoLoads:
    def load_s(self, ex, inv) -> float:
        return 0.0

    def exposed_load_s(self, ex, inv) -> float:
        return 0.0

    def prepare(self, inv, free) -> None:
        pass


def _drive(trace: list[TraceRequest], gpus: int, run_s: float) -> list[tuple[float, str, tuple[str, ...]]]:
    """The dispatcher alone on a scripted clock: arrivals at their times, each run takes `run_s`."""
    clock = [0.0]
    scheduler = make_scheduler("vtime", 10.0, clock=lambda: clock[0])
    d = Dispatcher(scheduler, _NoLoads(), warm_wait=WarmWaitPolicy(enabled=False))
    executors = [_Gpu(i) for i in range(gpus)]
    events = [(r.time, i, "arrive", i) for i, r in enumerate(trace)]
    heapq.heapify(events)
    seq, out = len(events), []
    while events:
        t, _, kind, obj = heapq.heappop(events)
        clock[0] = t
        if kind == "arrive":
            r = trace[obj]
            d.add(Invocation(obj + 1, r.tenant, str(obj), "step", r.workflow[1:], run_s))
        else:
            ex, invs = obj
            ex.busy = False
            for inv in invs:
                scheduler.complete(inv, run_s)
        for a in d.schedule(t, executors):
            a.executor.busy, a.executor.busy_until = True, t + run_s
            out.append((t, a.executor.id, tuple(inv.request for inv in a.invocations)))
            seq += 1
            heapq.heappush(events, (t + run_s, seq, "done", (a.executor, a.invocations)))
    return out


def test_the_simulator_makes_the_dispatchers_decisions_and_no_others():
    workflows, profiles = _one_step(("m", "n"))
    trace = [
        TraceRequest(t, tenant, w)
        for t, tenant, w in [
            (0.0, "a", "wm"),
            (0.0, "b", "wn"),
            (0.0, "a", "wm"),
            (0.2, "b", "wm"),
            (0.3, "c", "wn"),
            (0.3, "a", "wn"),
            (1.1, "b", "wm"),
            (1.5, "c", "wm"),
            (2.0, "a", "wn"),
            (2.0, "b", "wn"),
        ]
    ]
    sim = Simulator(SimConfig(gpus=2, wait_for_warm=False, prefix_loading=False), workflows, profiles)
    seen: list[tuple[float, str, tuple[str, ...]]] = []
    schedule = sim.dispatcher.schedule

    def recording(now, executors):
        for a in schedule(now, executors):
            seen.append((now, a.executor.id, tuple(inv.request for inv in a.invocations)))
            yield a

    sim.dispatcher.schedule = recording
    sim.run(trace)
    run_s = sim.compute["m"]
    assert len(seen) == len(trace)
    assert seen == _drive(trace, 2, run_s)


def test_the_simulator_batches_same_model_steps_and_spends_less_gpu_time():
    workflows, profiles = _one_step()
    trace = [TraceRequest(0.01 * i, f"t{i % 4}", "wm") for i in range(16)]
    alone = simulate(SimConfig(gpus=1), trace, workflows, profiles)
    batched = Simulator(SimConfig(gpus=1, max_batch=4), workflows, profiles)
    merged = batched.run(trace)
    assert batched.dispatcher.counters["batches_dispatched"] >= 3
    assert batched.dispatcher.counters["parts_batched"] >= 12
    assert merged.gpu_busy_s < 0.8 * alone.gpu_busy_s
    assert all(r.finish is not None for r in merged.requests)
    assert max(r.finish for r in merged.requests) < max(r.finish for r in alone.requests)


def test_a_batch_window_waits_for_the_next_arrival():
    workflows, profiles = _one_step()
    trace = [TraceRequest(0.0, "a", "wm"), TraceRequest(0.05, "b", "wm")]
    sim = Simulator(SimConfig(gpus=1, max_batch=2, batch_window_s=0.1), workflows, profiles)
    result = sim.run(trace)
    assert sim.dispatcher.counters["batches_dispatched"] == 1
    assert result.requests[0].finish == pytest.approx(result.requests[1].finish)
