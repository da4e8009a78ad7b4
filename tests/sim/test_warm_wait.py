"""Delay scheduling (cluster.scheduling.warm_wait): park for a warm executor only when that beats loading."""

from __future__ import annotations

import pytest

from cluster.scheduling.warm_wait import Parked, WarmWaitPolicy, load_estimate, pick_parked, should_park
from cluster.sim.gpu_profiles import ModelProfile
from cluster.sim.simulator import SimConfig, simulate
from cluster.sim.traces import TraceRequest
from cluster.sim.workflows import SimNode, Workflow


def test_parks_when_a_holder_frees_up_sooner_than_the_load():
    assert should_park(load_s=3.0, holders_free_in=[0.2, 5.0], already_parked=0)
    assert not should_park(load_s=3.0, holders_free_in=[4.0], already_parked=0)
    assert not should_park(load_s=3.0, holders_free_in=[], already_parked=0)
    assert not should_park(load_s=3.0, holders_free_in=[0.2], already_parked=0, policy=WarmWaitPolicy(enabled=False))


def test_at_most_the_policys_waiters_per_holder():
    assert not should_park(3.0, [0.2], already_parked=1)
    assert should_park(3.0, [0.2, 0.3], already_parked=1)
    assert should_park(3.0, [0.2], already_parked=1, policy=WarmWaitPolicy(max_waiters_per_holder=2))


def test_load_estimate_counts_only_missing_layers():
    assert load_estimate(10, 0, 2.0) == pytest.approx(2.0)
    assert load_estimate(10, 6, 2.0) == pytest.approx(0.8)
    assert load_estimate(10, 10, 2.0) == 0.0


def test_free_executor_takes_the_oldest_it_holds_weights_for_else_one_that_waited_out_its_load():
    parked = [
        Parked("a", since=1.0, load_s=5.0),
        Parked("b", since=0.5, load_s=5.0),
        Parked("c", since=2.0, load_s=5.0),
    ]
    assert pick_parked(parked, {"a", "c"}, now=3.0) == 0
    assert pick_parked(parked, set(), now=3.0) is None
    assert pick_parked(parked, set(), now=5.6) == 1  # b has waited 5.1 s >= its 5 s load
    assert pick_parked(parked, {"c"}, now=5.6) == 1  # the older one goes first


def _chain(steps: int) -> tuple[list[Workflow], dict[str, ModelProfile]]:
    p = {"m": ModelProfile("m", 4.0, 0.0, 1.0, 0.5, layers=1), "n": ModelProfile("n", 4.0, 0.0, 1.0, 0.5, layers=1)}
    return [
        Workflow("w", [SimNode("step", "m", (i - 1,) if i else (), 0) for i in range(steps)]),
        Workflow("v", [SimNode("step", "n", (), 0)]),
    ], p


def test_simulated_request_waits_for_its_warm_executor_instead_of_loading_elsewhere():
    # two executors; request 1 warms "m" on one; while it runs, request 2 (same model) arrives: waiting
    # 0.5 s for the warm executor beats a 4 s load on the idle one
    workflows, profiles = _chain(1)
    trace = [TraceRequest(0.0, "t", "w"), TraceRequest(10.0, "t", "w"), TraceRequest(10.1, "t", "w")]
    waited = simulate(SimConfig(gpus=2, wait_for_warm=True), trace, workflows, profiles)
    loaded = simulate(SimConfig(gpus=2, wait_for_warm=False), trace, workflows, profiles)
    assert waited.requests[2].finish == pytest.approx(11.0, abs=1e-6)  # 10.5 + 0.5 on the warm one
    assert loaded.requests[2].finish == pytest.approx(10.1 + 4.0 + 0.5, abs=1e-6)
    assert waited.loads["miss"] == 1 and loaded.loads["miss"] == 2
