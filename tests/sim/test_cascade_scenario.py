"""The cascade benchmark is a scenario of the one simulator: its queries are dispatched by
cluster.scheduling.dispatcher (batch caps, placement), the heavy stage runs exactly when the confidence is below
the threshold in force, and the dispatcher sheds what cannot finish within 1.5 x SLO (an option the
head leaves off)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from cluster.cascade.allocation import Allocation
from cluster.scheduling.dispatcher import Dispatcher
from cluster.scheduling.policies import make_scheduler
from cluster.scheduling.tenant_scheduler import Invocation
from cluster.sim import cascade_scenario
from cluster.sim.cascade_scenario import DISCRIMINATOR, CascadeRun, simulate

pytest.importorskip("scipy")

C1 = cascade_scenario.Cascade(((0.0, 0.0), (0.5, 0.5), (1.0, 1.0)), (18.0, 22.0), executors=4)
STEADY = [0.5 * i for i in range(60)]  # 2 queries/s for 30 s


def test_what_the_executors_run_is_what_the_dispatcher_assigned(monkeypatch):
    assigned, ran = [], []
    schedule = Dispatcher.schedule

    def spy_schedule(self, now, executors):
        for a in schedule(self, now, executors):
            model = a.invocations[0].model_key
            assert len(a.invocations) <= self.batch_size(model)  # the caps the decisions set
            assigned.append(tuple(inv.id for inv in a.invocations))
            yield a

    record = CascadeRun.ran

    def spy_ran(self, invs, seconds):
        ran.append(tuple(inv.id for inv in invs))
        record(self, invs, seconds)

    monkeypatch.setattr(Dispatcher, "schedule", spy_schedule)
    monkeypatch.setattr(CascadeRun, "ran", spy_ran)
    busy = replace(C1, executors=2)
    run = simulate(busy, "adaptive", [0.1 * i for i in range(300)], seed=3)
    assert Counter(ran) == Counter(assigned) and len(ran) > 100
    assert any(len(ids) > 1 for ids in ran)  # the dispatcher batched
    assert run.sim.dispatcher.batch_caps[DISCRIMINATOR] >= 1  # the decisions reached it


def test_the_heavy_stage_runs_exactly_below_the_threshold():
    plan = Allocation(0.3, 4, 4, 2, 2, 0.3, "fixed")
    run = CascadeRun(C1, "static", STEADY, plan, seed=1).run()
    assert all(q.answered and not q.dropped for q in run.queries)
    assert all((q.answered == "heavy") == (q.confidence < 0.3) for q in run.queries)
    assert 0 < sum(q.answered == "heavy" for q in run.queries) < len(STEADY)
    assert run.sim.scaling.floors == {C1.light: 2, C1.heavy: 2}  # the executor split, as replica floors


def test_overload_is_shed_by_the_dispatcher_within_one_and_a_half_slo():
    burst = [0.01 * i for i in range(60)]
    run = simulate(replace(C1, executors=1), "heavy", burst)
    dropped = [q for q in run.queries if q.dropped]
    assert dropped and run.sim.dispatcher.counters["shed"] == len(dropped)
    late_by = max(q.finish - q.arrival for q in run.queries if q.answered)
    assert late_by <= 1.5 * C1.slo_s + run.sim.load[C1.heavy]  # a cold first run may add its load
    unshed = simulate(replace(C1, executors=1, shed_factor=None), "heavy", burst)
    assert not any(q.dropped for q in unshed.queries)
    assert unshed.summary()["slo_violation"] >= run.summary()["slo_violation"]


def test_without_shed_run_s_the_dispatcher_never_sheds():
    class Gpu:
        id, cached_models, draining, load = "gpu0", {"m"}, False, 0

        def free_in(self, now):
            return 0.0

    class Loads:
        def load_s(self, ex, inv):
            return 0.0

        def exposed_load_s(self, ex, inv):
            return 0.0

        def prepare(self, inv, free):
            pass

    for shed_run_s, expect_shed in ((None, False), (lambda model, n: 2.0, True)):
        d = Dispatcher(make_scheduler("fifo", 10.0, clock=lambda: 5.0), Loads(), shed_run_s=shed_run_s)
        d.add(Invocation(1, "t", "r", "step", "m", 1.0, deadline=6.0))  # 5 + 2 > 6: hopeless
        assigned = list(d.schedule(5.0, [Gpu()]))
        assert (not assigned) == expect_shed
        assert [inv.id for inv in d.take_shed()] == ([1] if expect_shed else [])
