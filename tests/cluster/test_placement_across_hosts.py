"""Placement across hosts: a step goes to the host that holds its inputs, and when the only free
executor is on another host it is charged the time the inputs take to cross (the head's measured
bandwidth); with `--data-plane tcp` only the producer's own arena counts as near."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from cluster.control.loads import DEFAULT_TRANSFER_BPS, MeasuredLoads
from cluster.dataplane import remote
from cluster.scheduling.dispatcher import Dispatcher
from cluster.scheduling.policies import make_scheduler
from cluster.scheduling.tenant_scheduler import Invocation, place
from cluster.scheduling.warm_wait import WarmWaitPolicy

MiB = 1 << 20


@dataclass(eq=False)
class Ex:
    id: str
    host_id: str
    cached_models: set[str] = field(default_factory=lambda: {"m"})
    draining: bool = False
    load: int = 0

    def free_in(self, now: float) -> float:
        return 0.0


def _inv(i: int = 1) -> Invocation:
    # 64 MiB of input produced by executor "b1" on host B
    return Invocation(
        id=i,
        tenant="t",
        request=f"r{i}",
        fn="f",
        model_key="m",
        estimate=0.5,
        input_bytes={"b1": 64 * MiB},
        input_hosts={"B": 64 * MiB},
    )


def test_the_host_holding_the_inputs_wins_and_transfers_are_priced_by_measured_bandwidth():
    loads, a, b = MeasuredLoads(), Ex("a1", "A"), Ex("b2", "B")
    inv = _inv()
    loads.prepare(inv, [a, b])
    assert inv.transfer_s == {"a1": pytest.approx(64 * MiB / DEFAULT_TRANSFER_BPS)}
    assert place(inv, [a, b]) is b  # b2 is not the producer, but shares its host's memory
    loads.observe_transfer(64 * MiB, 0.032)  # executors pulled at ~2 GB/s
    loads.prepare(inv, [a, b])
    assert 64 * MiB / 2.1e9 < inv.transfer_s["a1"] < 64 * MiB / DEFAULT_TRANSFER_BPS


def test_weights_still_come_before_input_locality():
    loads, a, b = MeasuredLoads(), Ex("a1", "A"), Ex("b2", "B", cached_models=set())
    inv = _inv()
    loads.prepare(inv, [a, b])
    assert place(inv, [a, b]) is a


def test_with_tcp_forced_only_the_producers_own_arena_is_near(monkeypatch):
    monkeypatch.setattr(remote, "_mode", "tcp")
    loads, producer, neighbour = MeasuredLoads(), Ex("b1", "B"), Ex("b2", "B")
    inv = _inv()
    loads.prepare(inv, [producer, neighbour])
    assert set(inv.transfer_s) == {"b2"} and place(inv, [neighbour, producer]) is producer


def test_a_step_placed_away_from_its_inputs_is_charged_the_transfer():
    loads = MeasuredLoads()
    scheduler = make_scheduler("vtime", 1.0)
    d = Dispatcher(scheduler, loads, warm_wait=WarmWaitPolicy(enabled=False))
    far = Ex("a1", "A")
    inv = _inv()
    d.add(inv)
    (assignment,) = list(d.schedule(0.0, [far]))
    assert assignment.executor is far
    assert inv.charged == pytest.approx(0.5 + 64 * MiB / DEFAULT_TRANSFER_BPS)
    near_inv = _inv(2)
    d.add(near_inv)
    (assignment,) = list(d.schedule(0.0, [Ex("b2", "B")]))
    assert near_inv.charged == pytest.approx(0.5)
