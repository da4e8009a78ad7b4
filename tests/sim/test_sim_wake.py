"""The simulator wakes when the dispatcher says something may be decided without another event
(DispatchPolicy.wake_at), as the head's sleep does: a parked invocation that has waited its load time
takes a free cold executor then, not at the next arrival or completion."""

from __future__ import annotations

import pytest

from cluster.sim.simulator import SimConfig, Simulator
from cluster.sim.traces import TraceRequest
from cluster.sim.workflows import catalogue


class _Logged(Simulator):
    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.decisions: list[tuple[float, str, str]] = []

    def _start(self, a) -> None:
        for inv in a.invocations:
            self.decisions.append((self.now, a.executor.id, inv.request))
        super()._start(a)


def _mcache_pair() -> tuple[_Logged, float, float]:
    workflows, profiles = catalogue("s1")
    sim = _Logged(SimConfig(gpus=2, system="mcache", policy="fifo"), workflows, profiles)
    wf = sim.workflows["z-image-turbo"]
    load = sum(sim.load[m] for m in wf.models)
    trace = [TraceRequest(0.0, "t0", "z-image-turbo"), TraceRequest(0.5, "t0", "z-image-turbo")]
    sim.run(trace)
    return sim, load, sim.solo[wf.name]


def test_a_parked_invocation_takes_a_cold_executor_once_it_has_waited_its_load_time():
    sim, load, solo = _mcache_pair()
    # request 1 parks at 0.5 for gpu0000 (expected free at 1.28 s, sooner than the 2.6 s load) and,
    # gpu0000 still loading, runs cold on gpu0001 at 0.5 + load: before gpu0000 finishes at load + solo
    assert load + solo > 0.5 + load
    assert sim.decisions[0] == (0.0, "gpu0000", "0")
    t, ex, req = sim.decisions[1]
    assert (ex, req) == ("gpu0001", "1")
    assert t == pytest.approx(0.5 + load)
    assert sim.dispatcher.counters["warm_waits"] == 1 and sim.dispatcher.parked == 0
