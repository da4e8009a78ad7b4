"""The controller measures demand (EWMA), queues and latency per stage, and re-solves the allocation:
the threshold falls when demand rises and recovers when it falls."""

from __future__ import annotations

import random

import pytest

from cluster.cascade.controller import CascadeController
from cluster.cascade.profiles import DIFFSERVE_MS
from cluster.cascade.spec import CascadeSpec, Policy, StageSpec


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _spec(name: str = "c1", **policy) -> CascadeSpec:
    return CascadeSpec(
        name,
        StageSpec("sdturbo", 1),
        StageSpec("sdv15", 50),
        "disc",
        slo_s=5.0,
        policy=Policy(threshold_step=0.01, batch_sizes=(1, 2, 4, 8), headroom=1.0, **policy),
    )


def _controller(budget: int = 16) -> tuple[CascadeController, FakeClock]:
    clock = FakeClock()
    ctl = CascadeController(budget=budget, period_s=5.0, alpha=0.5, clock=clock)
    ctl.add(_spec())
    for stage, model in (("light", "sdturbo"), ("heavy", "sdv15")):
        for b in (1, 2, 4, 8):
            ctl.record_latency("c1", stage, b, DIFFSERVE_MS[model][b] / 1e3)
    rng = random.Random(0)
    for _ in range(400):  # uniform confidences: f(t) = t
        ctl.record_confidence("c1", rng.random(), "light")
    return ctl, clock


def _run(ctl: CascadeController, clock: FakeClock, qps: float, periods: int) -> list[float]:
    thresholds = []
    for _ in range(periods):
        clock.now += ctl.period_s
        ctl.cascades["c1"].arrivals += int(qps * ctl.period_s)
        thresholds.append(ctl.tick()["c1"].threshold)
    return thresholds


def test_threshold_follows_demand_down_and_up():
    ctl, clock = _controller()
    low = _run(ctl, clock, 2, 4)
    high = _run(ctl, clock, 25, 6)
    back = _run(ctl, clock, 2, 8)
    assert low[-1] == 1.0  # light load: every query may go to the heavy model
    assert high[-1] < 0.8 and high[-1] < high[0]  # peak: fewer deferrals so the SLO holds
    assert back[-1] == 1.0
    assert ctl.cascades["c1"].demand == pytest.approx(2, rel=0.05)
    decision = ctl.cascades["c1"].decision
    assert decision.executors <= 16 and decision.status == "optimal"


def test_demand_estimate_is_an_ewma_of_arrival_rate():
    ctl, clock = _controller()
    _run(ctl, clock, 4, 1)
    assert ctl.cascades["c1"].demand == 4
    _run(ctl, clock, 8, 1)
    assert ctl.cascades["c1"].demand == 6  # alpha 0.5


def test_queueing_delay_by_littles_law_lowers_the_threshold():
    ctl, clock = _controller()
    calm = _run(ctl, clock, 10, 3)[-1]
    heavy = ctl.cascades["c1"].stages["heavy"]
    heavy.inflight = 30  # a backlog: L = 30 at ~2 deferred q/s -> long waits
    heavy.arrivals = 0
    congested = []
    for _ in range(3):
        heavy.arrivals += int(10 * ctl.period_s * 0.5)
        congested += _run(ctl, clock, 10, 1)
    assert heavy.queueing_delay(4) > 1.0
    assert congested[-1] < calm


def test_listeners_receive_decisions_and_stats_list_cascades():
    ctl, clock = _controller()
    seen = []
    ctl.on_decision(lambda name, a: seen.append((name, a.light_executors, a.heavy_executors)))
    _run(ctl, clock, 3, 2)
    assert len(seen) == 2 and seen[-1][0] == "c1"
    stats = ctl.stats()
    c1 = stats["cascades"]["c1"]
    assert c1["decision"]["threshold"] == ctl.threshold("c1")
    assert c1["stages"]["heavy"]["latency_s"][4] == DIFFSERVE_MS["sdv15"][4] / 1e3
    assert c1["confidences_seen"] == 400 and c1["adaptive"]


def test_static_cascade_keeps_its_threshold_and_budget_is_shared_by_demand():
    ctl, clock = _controller(budget=12)
    ctl.add(_spec("static", threshold=0.3))
    ctl.cascades["static"].arrivals = 10
    ctl.cascades["c1"].arrivals = 30
    clock.now += 5
    decisions = ctl.tick()
    assert ctl.threshold("static") == 0.3 and decisions["static"].threshold == 0.3
    assert ctl._budget_shares() == {"c1": 9, "static": 3}


def test_stage_context_counts_inflight_and_measures_latency():
    ctl, clock = _controller()
    with ctl.stage("c1", "light", batch=2):
        assert ctl.cascades["c1"].stages["light"].inflight == 2
        clock.now += 0.5
    st = ctl.cascades["c1"].stages["light"]
    assert st.inflight == 0 and st.served == 2
    before = DIFFSERVE_MS["sdturbo"][2] / 1e3
    assert st.latency.measured[2] == pytest.approx(before + st.latency.alpha * (0.5 - before))


def _feed(ctl: CascadeController, clock: FakeClock, qps: float, seconds: int) -> list[tuple[float, float]]:
    """Arrivals at a steady `qps` through the data path, one tick a second; (time, threshold) per solve."""
    solves = []
    for _ in range(seconds):
        clock.now += 1.0
        ctl.cascades["c1"].arrivals += int(qps)
        decisions = ctl.maybe_tick()
        if decisions:
            solves.append((clock.now, decisions["c1"].threshold))
    return solves


def _ticking_controller() -> tuple[CascadeController, FakeClock]:
    ctl, clock = _controller()
    ctl.tick_s = 1.0
    return ctl, clock


def test_step_increase_in_demand_lowers_the_threshold_within_one_tick():
    ctl, clock = _ticking_controller()
    _feed(ctl, clock, 3, 12)
    assert ctl.threshold("c1") == 1.0
    step_at = clock.now
    solves = _feed(ctl, clock, 25, 1)  # the period is 5 s; the step is seen after 1 s
    assert solves and solves[0][0] == step_at + 1.0 and solves[0][1] < 1.0
    assert ctl.cascades["c1"].solves["spike"] >= 1


def test_backlog_in_the_heavy_stage_lowers_the_threshold_within_one_tick():
    ctl, clock = _ticking_controller()
    _feed(ctl, clock, 8, 12)
    calm = ctl.threshold("c1")
    heavy = ctl.cascades["c1"].stages["heavy"]
    heavy.arrivals, heavy.inflight = 8, 40  # 40 queries waiting at ~8 q/s: about 5 s of queueing
    solves = _feed(ctl, clock, 8, 1)
    assert solves and solves[0][1] < calm


def test_steady_or_falling_demand_solves_only_every_period():
    ctl, clock = _ticking_controller()
    _feed(ctl, clock, 10, 3)
    steady = _feed(ctl, clock, 10, 20)
    times = [t for t, _ in steady]
    assert len(times) == 4 and all(b - a == ctl.period_s for a, b in zip(times, times[1:]))
    falling = _feed(ctl, clock, 2, 5)  # less load still fits: no early solve, no flapping
    assert [t for t, _ in falling] == [times[-1] + ctl.period_s]
    assert "spike" not in ctl.cascades["c1"].solves


def test_planned_demand_is_the_ewma_upper_confidence_bound_with_headroom():
    ctl, clock = _ticking_controller()
    ctl.confidence_z = 2.0
    for qps in (10, 14, 6, 12, 8):
        _feed(ctl, clock, qps, 1)
    state = ctl.cascades["c1"]
    assert state.demand_var > 0
    se = (state.demand_var * ctl.alpha / (2 - ctl.alpha)) ** 0.5
    assert ctl.planning_demand(state) == pytest.approx(state.demand + 2.0 * se)  # headroom 1.0 here
    spec = state.spec
    ctl.add(
        CascadeSpec(
            spec.name,
            spec.light,
            spec.heavy,
            spec.discriminator,
            spec.slo_s,
            Policy(threshold_step=0.01, batch_sizes=(1, 2, 4, 8), headroom=1.5),
        )
    )
    assert ctl.planning_demand(state) == pytest.approx(1.5 * (state.demand + 2.0 * se))
