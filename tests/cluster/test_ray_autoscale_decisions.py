"""`serve --ray-autoscale LOW:HIGH` decides from the head's view of its executors: one more while invocations
queue and every executor is busy (none still starting), never past HIGH; an executor idle for the keep-alive
is retired, never below LOW, and none while work queues."""

from __future__ import annotations

from cluster.executor.ray_executors import Autoscale, Placed


def placed(*ids: str, idle_since: float = 0.0) -> list[Placed]:
    return [Placed("", "cpu", actor=None, executor_id=i, idle_since=idle_since) for i in ids]


def seen(id: str, running: bool = False, completed: int = 0) -> dict:
    return {"id": id, "running": ["denoise_step"] if running else [], "queue": int(running), "completed": completed}


def test_from_zero_a_queued_invocation_asks_for_one_executor_and_waits_for_it_to_start():
    policy = Autoscale(0, 2, keepalive_s=5)
    assert policy.decide([], {}, queued=3, now=10) == (1, [])
    starting = placed("a")  # placed, not registered yet: no second one
    assert policy.decide(starting, {}, queued=3, now=11) == (0, [])


def test_a_backlog_with_every_executor_busy_adds_one_up_to_high():
    policy = Autoscale(0, 2, keepalive_s=5)
    ps = placed("a")
    assert policy.decide(ps, {"a": seen("a", running=True)}, queued=2, now=10) == (1, [])
    ps = placed("a", "b")
    both = {"a": seen("a", running=True), "b": seen("b", running=True)}
    assert policy.decide(ps, both, queued=2, now=10) == (0, [])  # at HIGH
    one_free = {"a": seen("a", running=True), "b": seen("b")}
    assert policy.decide(ps, one_free, queued=2, now=10) == (0, [])  # a free executor takes the work


def test_idle_executors_are_retired_after_the_keepalive_down_to_low():
    policy = Autoscale(1, 4, keepalive_s=5)
    ps = placed("a", "b", "c", idle_since=0.0)
    ps[2].completed = 7
    views = {"a": seen("a"), "b": seen("b"), "c": seen("c", completed=9)}  # c finished work since the last look
    add, retire = policy.decide(ps, views, queued=0, now=6)
    assert add == 0 and [p.executor_id for p in retire] == ["a", "b"]
    assert ps[2].idle_since == 6
    add, retire = policy.decide(ps[:1], {"a": seen("a")}, queued=0, now=60)
    assert (add, retire) == (0, [])  # LOW is kept
    assert policy.decide(ps, views, queued=1, now=60)[1] == []  # nothing retired while work queues


def test_low_is_placed_at_start():
    assert Autoscale(2, 4).decide([], {}, queued=0, now=0) == (2, [])
