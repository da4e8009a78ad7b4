"""DiffServe's allocation: the MILP (HiGHS) finds the same optimum as exhaustive enumeration, its
decisions satisfy every constraint, and infeasible instances degrade to all-light with shedding."""

from __future__ import annotations

import math
import random

import pytest

from cluster.cascade.allocation import (
    Allocation,
    Problem,
    StageProfile,
    allocate,
    degrade,
    holds,
    solve_exhaustive,
    solve_milp,
)
from cluster.cascade.profiles import reference_profile

BATCHES = (1, 2, 4, 8)


def _profile(rng: random.Random, base: float) -> StageProfile:
    # Sub-linear in batch size, as GPUs are, with noise so that no batch size dominates by construction.
    return StageProfile(BATCHES, tuple(base * (1 + 0.7 * (b - 1)) * rng.uniform(0.85, 1.15) for b in BATCHES))


def _random_problem(rng: random.Random) -> Problem:
    thresholds = tuple(round(0.05 * i, 2) for i in range(21))
    deferred = sorted(rng.random() for _ in thresholds)
    deferred[0] = 0.0
    return Problem(
        _profile(rng, rng.uniform(0.05, 0.3)),
        _profile(rng, rng.uniform(0.5, 3.0)),
        thresholds,
        tuple(deferred),
        demand=rng.uniform(0, 30),
        slo_s=rng.uniform(0.5, 8),
        budget=rng.randint(1, 16),
        queue_light_s=rng.uniform(0, 0.5),
        queue_heavy_s=rng.uniform(0, 1),
        batch_wait=rng.choice((0.0, 0.25, 1.0)),
    )


def _violations(p: Problem, a) -> list[str]:
    """Check an allocation against the constraints directly (independent of both solvers)."""
    out = []
    i = p.light.batch_sizes.index(a.light_batch)
    if a.light_executors * p.light.throughput()[i] < p.demand - 1e-6:
        out.append("light capacity")
    l1 = p.light.latency_s[i]
    latency = l1 + max(p.queue_light_s, p.batch_wait * l1)
    heavy_load = p.demand * a.deferred
    if a.heavy_batch:
        j = p.heavy.batch_sizes.index(a.heavy_batch)
        l2 = p.heavy.latency_s[j]
        latency += l2 + max(p.queue_heavy_s, p.batch_wait * l2)
        if a.heavy_executors * p.heavy.throughput()[j] < heavy_load - 1e-6:
            out.append("heavy capacity")
    elif heavy_load > 1e-6:
        out.append("deferred queries but no heavy stage")
    if latency > p.slo_s + 1e-6:
        out.append("latency")
    if a.executors > p.budget or a.light_executors < 1:
        out.append("executors")
    return out


def test_milp_equals_enumeration_on_random_instances():
    rng = random.Random(7)
    feasible = infeasible = 0
    for _ in range(120):
        p = _random_problem(rng)
        milp, brute = solve_milp(p), solve_exhaustive(p)
        assert (milp is None) == (brute is None), p
        if milp is None:
            infeasible += 1
            continue
        feasible += 1
        assert (milp.threshold, milp.executors) == (brute.threshold, brute.executors), p
        assert _violations(p, milp) == [] and _violations(p, brute) == []
    assert feasible > 50 and infeasible > 3  # the sample exercises both outcomes


def test_threshold_falls_as_demand_rises_with_diffserve_profiles():
    light = reference_profile("sdturbo", BATCHES, extra_s=0.02)
    heavy = reference_profile("sdv15", BATCHES)
    thresholds = tuple(round(0.01 * i, 2) for i in range(101))
    deferred = tuple(min(1.0, 2 * t) for t in thresholds)
    chosen = []
    for demand in (4, 16, 24, 32):
        p = Problem(light, heavy, thresholds, deferred, demand, slo_s=5.0, budget=16)
        a = allocate(p)
        assert a.status == "optimal" and _violations(p, a) == []
        chosen.append(a.threshold)
    assert chosen == sorted(chosen, reverse=True) and chosen[0] > chosen[-1]


def test_infeasible_instance_degrades_to_all_light_with_shedding():
    light = StageProfile((1, 2), (0.5, 0.8))
    heavy = StageProfile((1, 2), (3.0, 5.0))
    p = Problem(light, heavy, (0.0, 0.5), (0.0, 0.6), demand=20.0, slo_s=2.0, budget=2)
    assert solve_milp(p) is None and solve_exhaustive(p) is None
    a = allocate(p)
    assert a.status == "degraded" and a.heavy_executors == 0 and a.light_executors == 2
    assert a.threshold == 0.0 and a.light_batch == 2  # most throughput within the SLO
    assert a.shed_fraction == pytest.approx(1 - 2 * (2 / 0.8) / 20)


def test_degrade_picks_fastest_batch_when_no_batch_meets_the_slo():
    p = Problem(StageProfile((1, 4), (3.0, 6.0)), StageProfile((1,), (9.0,)), (0.0,), (0.0,), 1.0, 1.0, 3)
    a = degrade(p)
    assert a.light_batch == 1 and a.status == "degraded"


def test_zero_demand_keeps_one_light_executor_warm():
    p = Problem(StageProfile((1,), (0.1,)), StageProfile((1,), (1.0,)), (0.0, 0.5, 1.0), (0.0, 0.5, 1.0), 0.0, 5.0, 4)
    a = allocate(p)
    assert a.light_executors == 1 and a.threshold == 1.0 and a.heavy_executors == 0


def test_fewest_executors_among_equal_thresholds():
    p = Problem(StageProfile((1, 8), (1.0, 1.6)), StageProfile((1,), (1.0,)), (0.0,), (0.0,), 4.5, 5.0, 10)
    a = solve_milp(p)
    assert a.light_batch == 8 and a.light_executors == math.ceil(4.5 / 5.0)


def test_batch_wait_prices_the_running_batch_into_the_slo():
    # l1 + l2 = 4.4 s fits a 5 s SLO; waiting half a batch per stage (6.6 s) does not, so the heavy
    # stage drops to its smaller, faster batch.
    light = StageProfile((1, 4), (0.1, 0.4))
    heavy = StageProfile((1, 4), (2.0, 4.0))
    base = dict(thresholds=(0.0, 1.0), deferred=(0.0, 1.0), demand=1.0, slo_s=5.0, budget=8)
    assert solve_milp(Problem(light, heavy, **base)).heavy_batch == 4
    waiting = Problem(light, heavy, **base, batch_wait=0.5)
    a, b = solve_milp(waiting), solve_exhaustive(waiting)
    assert (a.heavy_batch, a.threshold) == (b.heavy_batch, b.threshold) == (1, 1.0)
    assert _violations(waiting, a) == []


def test_holds_detects_a_decision_outgrown_by_demand_or_queueing():
    light = reference_profile("sdturbo", BATCHES, extra_s=0.02)
    heavy = reference_profile("sdv15", BATCHES)
    thresholds = tuple(round(0.01 * i, 2) for i in range(101))
    deferred = tuple(min(1.0, 2 * t) for t in thresholds)
    p = Problem(light, heavy, thresholds, deferred, 10.0, slo_s=5.0, budget=16)
    a = allocate(p)
    assert holds(p, a)
    assert not holds(Problem(light, heavy, thresholds, deferred, 14.0, 5.0, 16), a)  # demand spike
    assert not holds(Problem(light, heavy, thresholds, deferred, 10.0, 5.0, 16, queue_heavy_s=2.0), a)
    assert not holds(Problem(light, heavy, thresholds, deferred, 10.0, 5.0, a.executors - 1), a)
    assert holds(Problem(light, heavy, thresholds, deferred, 5.0, 5.0, 16), a)  # less load fits
    assert not holds(p, Allocation(**{**a.as_dict(), "status": "degraded"}))
