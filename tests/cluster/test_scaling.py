"""The per-model scaling controller: targets follow measured demand, cold models lose their claim,
and placement scales a hot model out without pushing out the last warm copies of another."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from cluster.scheduling.scaling import ScalingController, displacement, replica_counts
from cluster.scheduling.tenant_scheduler import Invocation, place


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@dataclass(eq=False)
class Ex:
    id: str
    cached_models: set[str] = field(default_factory=set)
    load: int = 0


def test_targets_follow_demand_and_are_capped_by_the_executors():
    clock = Clock()
    c = ScalingController(window_s=10.0, target_utilisation=0.5, clock=clock)
    for _ in range(20):
        c.observe("hot", 1.0)  # 20 executor-seconds in 10 s: two executors' worth
    c.observe("warm", 1.0)  # a tenth of one
    assert c.demand() == pytest.approx({"hot": 2.0, "warm": 0.1})
    assert c.targets(8) == {"hot": 4, "warm": 1}  # 2.0 / 0.5, and at least one while in demand
    assert c.targets(3) == {"hot": 3, "warm": 1}


def test_a_model_without_recent_demand_has_no_target():
    clock = Clock()
    c = ScalingController(window_s=10.0, clock=clock)
    c.observe("old", 5.0)
    clock.t = 6.0
    c.observe("new", 1.0)
    assert set(c.targets(4)) == {"old", "new"}
    clock.t = 10.5  # "old" left the window, "new" has not
    assert c.targets(4) == {"new": 1}
    assert c.report([Ex("a", {"old"}), Ex("b", {"new"})]) == {
        "new": {"demand": 0.1, "target": 1, "replicas": 1},
        "old": {"demand": 0.0, "target": 0, "replicas": 1},
    }


def test_placement_scales_a_hot_model_out_onto_the_executor_holding_a_cold_one():
    executors = [Ex("a", {"hot"}, load=1), Ex("b", {"other"}), Ex("c", {"cold"})]
    targets = {"hot": 3, "other": 1}  # "cold" has no demand any more
    replicas = replica_counts(executors)
    inv = Invocation(1, "t", "r", "f", "hot", 0.1)
    free = [e for e in executors if e.load == 0]
    assert displacement(executors[1], "hot", targets, replicas) == 1  # the only warm copy of "other"
    assert displacement(executors[2], "hot", targets, replicas) == 0
    assert place(inv, free, targets, replicas).id == "c"
    assert place(inv, free).id == "b"  # without the controller: ties broken by id


def test_placement_still_prefers_an_executor_that_holds_the_weights():
    executors = [Ex("a", {"m", "x"}), Ex("b", set())]
    inv = Invocation(1, "t", "r", "f", "m", 0.1)
    assert place(inv, executors, {"m": 1, "x": 1}, replica_counts(executors)).id == "a"


def test_utilisation_must_be_a_fraction():
    with pytest.raises(ValueError):
        ScalingController(target_utilisation=0)
