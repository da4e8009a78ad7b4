"""The head's parts, each on its own (cluster.control): transport, membership and liveness, lineage and
re-runs, preloads, results, and the worker that does the head's work. No head, no executor process."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures as cf
import os
import socket
import subprocess
import sys
import threading
import time
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
import zmq

from cluster import messages as m
from cluster import secret as cluster_secret
from cluster.control.errors import DeadlineExceeded, ExecutorLost, InputLost, ModelFnError, RequestCancelled
from cluster.control.lineage import Job, Lineage
from cluster.control.liveness import Liveness
from cluster.control.loads import MeasuredLoads
from cluster.control.membership import ExecutorState, Membership
from cluster.control.preloads import Preloads
from cluster.control.results import LoopReaders, Result, Results
from cluster.control.transport import Transport
from cluster.control.worker import HeadWorker
from cluster.dataplane.host_teams import HostTeams
from cluster.scheduling.costs import CostModel
from cluster.scheduling.scaling import ScalingController
from cluster.scheduling.tenant_scheduler import Invocation


class Recorder:
    """Stands in for the scheduler and the dispatcher: records what the part tells them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def complete(self, inv: Invocation, measured: float | None) -> None:
        self.calls.append(("complete", measured))

    def requeue(self, inv: Invocation) -> None:
        self.calls.append(("requeue", inv.id))

    def cancel(self, invs: Any) -> None:
        self.calls.append(("cancel", sorted(inv.id for inv in invs)))


def executor(name: str = "e1", **kw: Any) -> ExecutorState:
    return ExecutorState(name, name.encode(), "here", 1, "cpu", 1, 0, 0, set(), f"cc-{name}", time.monotonic(), **kw)


def job(inv_id: int, request: str = "r1", deadline_s: float = 60.0, fn: str = "f") -> Job:
    inv = Invocation(id=inv_id, tenant="t", request=request, fn=fn, model_key="k", estimate=1.0)
    dispatch = SimpleNamespace(dispatch_id=0, deadline_s=deadline_s)  # what lineage reads of an m.Dispatch
    j = Job(inv, dispatch, (), cf.Future())
    inv.payload = j
    return j


def running_on(ex: ExecutorState, *jobs: Job, dispatched_at: float | None = None) -> None:
    for i, j in enumerate(jobs, 1):
        j.attempts += 1
        j.executor = ex
        j.dispatched_at = time.monotonic() if dispatched_at is None else dispatched_at
        j.dispatch.dispatch_id = i
        ex.inflight[i] = j


def lineage(max_attempts: int = 3) -> tuple[Lineage, Recorder, collections.Counter]:
    rec, counters = Recorder(), collections.Counter()
    return Lineage(rec, rec, counters, max_attempts), rec, counters


# transport ----------------------------------------------------------------------------------------


def test_transport_decodes_messages_and_drops_garbage(tmp_path):
    counters = collections.Counter()
    t = Transport(f"ipc://{tmp_path}/head.sock", counters)
    t.bind()
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.setsockopt(zmq.IDENTITY, b"ex-1")
    dealer.connect(t.address)
    try:
        dealer.send(b"\x00not msgpack of a message")
        dealer.send(m.encode(m.Heartbeat(queue=2, memory_used=5, cached_models=["k"])))
        dealer.send_multipart([b"one", b"frame", b"too many"])
        got: list[tuple[bytes, m.ToHead]] = []
        end = time.monotonic() + 5
        while len(got) < 1 or counters["bad_messages"] < 2:
            assert time.monotonic() < end, (got, counters)
            t.receive(lambda identity, msg: got.append((identity, msg)))
            time.sleep(0.01)
        assert got == [(b"ex-1", m.Heartbeat(queue=2, memory_used=5, cached_models=["k"]))]
        assert counters["bad_messages"] == 2
        t.reply(b"nobody", m.Reset())  # an identity that is gone needs no answer, and raises nothing
        with pytest.raises(zmq.ZMQError):
            t.send(b"nobody", m.Reset())  # a registered executor's loss is the head's to decide
    finally:
        dealer.close(0)
        t.close()
        t.unlink()
    assert not (tmp_path / "head.sock").exists()


def test_transport_names_a_reachable_address_for_a_wildcard_host():
    t = Transport("tcp://0.0.0.0:7000", collections.Counter())
    assert t.reachable_address.startswith("tcp://") and "0.0.0.0" not in t.reachable_address
    assert t.reachable_address.endswith(":7000")
    assert Transport("ipc:///tmp/x.sock", collections.Counter()).reachable_address == "ipc:///tmp/x.sock"


# membership and liveness --------------------------------------------------------------------------


def register(executor_id: str, proof: bytes = b"") -> m.Register:
    return m.Register(
        executor_id=executor_id,
        host="here",
        pid=1,
        device="cpu",
        threads=1,
        memory_budget=0,
        memory_used=0,
        cached_models=[],
        shm_prefix=f"cc-{executor_id}",
        proof=proof,
    )


def test_membership_admits_only_executors_that_prove_the_secret():
    secret = b"s" * 32
    replies: list[tuple[bytes, Any]] = []
    counters = collections.Counter()
    members = Membership(secret, lambda identity, msg: replies.append((identity, msg)), counters, "here", "")

    assert members.admit(b"a", register("a")) is None  # no hello, no proof
    assert replies[-1] == (b"a", m.Refused("it presented no cluster secret"))

    members.challenge(b"b", m.Hello(nonce=b"n" * 16))
    challenge = replies[-1][1]
    assert cluster_secret.verify(secret, challenge.proof, b"head", b"n" * 16, challenge.nonce)
    wrong = cluster_secret.proof(b"x" * 32, b"executor", challenge.nonce, b"n" * 16, b"b")
    assert members.admit(b"b", register("b", wrong)) is None
    assert replies[-1] == (b"b", m.Refused("its cluster secret does not match this head's"))

    members.challenge(b"c", m.Hello(nonce=b"m" * 16))
    nonce = replies[-1][1].nonce
    right = cluster_secret.proof(secret, b"executor", nonce, b"m" * 16, b"c")
    ex = members.admit(b"c", register("c", right))
    assert ex is not None and ex.id == "c" and counters["executors_refused"] == 2
    members.add(ex)
    assert members.find(b"c") is ex and members.executors == {"c": ex}


def test_membership_finds_the_silent_and_forgets_each_once():
    members = Membership(None, lambda identity, msg: None, collections.Counter(), "here", "")
    quiet, chatty = executor("quiet"), executor("chatty")
    for ex in (quiet, chatty):
        members.add(ex)
    quiet.last_seen -= 10
    members.heard(chatty, m.Heartbeat(queue=1, memory_used=3, cached_models=["k"]))
    assert members.overdue(time.monotonic(), lost_after_s=3.0) == [quiet]
    assert chatty.cached_models == {"k"} and chatty.memory_used == 3
    assert members.forget(quiet) and not members.forget(quiet)
    assert members.find(b"quiet") is None and list(members.executors) == ["chatty"]


class FakeTransport:
    """Sends succeed except to identities in `gone`."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, Any]] = []
        self.gone: set[bytes] = set()

    def send(self, identity: bytes, msg: Any) -> None:
        if identity in self.gone:
            raise zmq.ZMQError(zmq.EHOSTUNREACH)
        self.sent.append((identity, msg))

    def reply(self, identity: bytes, msg: Any) -> None:
        self.sent.append((identity, msg))


def liveness(host: str = "elsewhere") -> tuple[Liveness, FakeTransport, Recorder, collections.Counter]:
    """A Liveness whose head runs on `host` (executors register from "here")."""
    transport, counters = FakeTransport(), collections.Counter()
    members = Membership(None, transport.reply, counters, host, "")
    lin, rec, _ = lineage()
    lin.counters = counters
    live = Liveness(members, transport, lin, counters, 0.5, 3.0, lambda: "", lambda ex: None)
    return live, transport, rec, counters


def test_liveness_welcomes_a_registration_and_loses_the_restarted_old_self():
    live, transport, rec, counters = liveness()
    lost: list[str] = []
    live.lost_watchers.append(lost.append)
    live.register(b"first", register("e1"))
    old = live.members.executors["e1"]
    j = job(1)
    live.lineage.track(j)
    running_on(old, j)

    live.register(b"second", register("e1"))  # the same executor id, restarted

    assert transport.sent[0] == (b"first", m.Welcome(0.5, "")) and transport.sent[-1] == (b"second", m.Welcome(0.5, ""))
    assert live.members.executors["e1"] is not old and old.draining and lost == ["cc-e1"]
    assert counters["executors_lost"] == 1 and counters["reruns"] == 1 and rec.calls == [("requeue", 1)]


def test_liveness_loses_the_silent_and_those_it_cannot_reach():
    live, transport, rec, counters = liveness()
    for name in ("silent", "unreachable", "fine"):
        live.register(name.encode(), register(name))
    live.members.executors["silent"].last_seen -= 10
    transport.gone.add(b"unreachable")

    live.check(time.monotonic())
    assert sorted(live.members.executors) == ["fine", "unreachable"]  # sends fail only when there is one
    assert not live.send(live.members.executors["unreachable"], m.Shutdown())
    assert list(live.members.executors) == ["fine"] and counters["executors_lost"] == 2
    assert live.retire("fine") and transport.sent[-1] == (b"fine", m.Shutdown())


def test_a_silent_live_process_of_this_host_is_waited_for_until_it_counts_as_wedged():
    """Silence from a live local executor is an overloaded host more often than a wedged process: it is lost
    only after hung_after_s; a local one whose process is gone, and one of another host, after lost_after_s."""
    live, _, _, counters = liveness(host="here")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    for name, pid in (("live", os.getpid()), ("exited", gone.pid)):
        live.register(name.encode(), msgspec.structs.replace(register(name), pid=pid))
    for ex in live.members.executors.values():
        ex.last_seen -= 10
    live.check(time.monotonic())
    assert list(live.members.executors) == ["live"] and counters["executors_lost"] == 1
    live.members.executors["live"].last_seen -= live.hung_after_s
    live.check(time.monotonic())
    assert live.members.executors == {} and counters["executors_lost"] == 2


def test_silence_while_the_head_itself_did_not_run_is_not_counted():
    live, _, _, counters = liveness()
    live.register(b"e1", register("e1"))
    now = time.monotonic()
    live.check(now)
    # the head was away 10 s (an overloaded host): the executor's heartbeats of that time may be on their way
    live.members.executors["e1"].last_seen = now
    live.check(now + 10)
    assert list(live.members.executors) == ["e1"]
    for tick in range(1, 40):  # watched silence this time: a check each tick
        live.check(now + 10 + tick * 0.1)
    assert live.members.executors == {} and counters["executors_lost"] == 1


# lineage and re-runs ------------------------------------------------------------------------------


def test_lineage_reruns_a_lost_executors_work_until_its_attempts_are_spent():
    lin, rec, counters = lineage(max_attempts=2)
    ex = executor()
    first, second = job(1), job(2)
    for j in (first, second):
        lin.track(j)
    running_on(ex, first, second)
    second.attempts = 2  # its second executor is the one lost now

    lin.rerun(ex.inflight.values(), ex.id, "no heartbeat")

    assert rec.calls == [("requeue", 1), ("complete", None)]
    assert counters["reruns"] == 1 and first.executor is None and not first.future.done()
    with pytest.raises(ExecutorLost, match="lost its executor 2 times"):
        second.future.result(0)
    assert lin.requests() == ["r1"]  # the re-run one is still the request's


def test_lineage_fails_what_runs_past_its_deadline_with_the_rest_of_its_request():
    lin, rec, counters = lineage()
    ex = executor()
    late, queued = job(1, deadline_s=1.0), job(2)
    for j in (late, queued):
        lin.track(j)
    running_on(ex, late, dispatched_at=time.monotonic() - 5)

    assert lin.expire(ex, time.monotonic()) == [(1, 1.0)]

    assert ex.zombies == {1} and ex.draining and not ex.inflight
    with pytest.raises(DeadlineExceeded):
        late.future.result(0)
    with pytest.raises(RequestCancelled, match="deadline of 1s"):
        queued.future.result(0)
    assert ("cancel", [2]) in rec.calls and counters["deadline_exceeded"] == 1 and lin.requests() == []


# preloads -----------------------------------------------------------------------------------------


def test_preloads_tell_each_executor_once_per_order_and_skip_the_draining():
    pre = Preloads(CostModel())
    pre.remember("k1", "f", b"p1")
    sent: list[tuple[str, m.Preload]] = []
    ready, busy = executor("ready"), executor("busy", draining=True)

    def send(ex: ExecutorState, msg: m.Preload) -> bool:
        sent.append((ex.id, msg))
        return True

    pre.send(["unknown", "k1"], [ready, busy], send)
    pre.send(["unknown", "k1"], [ready, busy], send)  # unchanged: nothing new to say
    assert [(who, [(p.fn, p.model_key) for p in msg.models]) for who, msg in sent] == [("ready", [("f", "k1")])]
    pre.send(["unknown"], [ready], send)  # nothing it knows how to load
    assert len(sent) == 1


# results ------------------------------------------------------------------------------------------


def results() -> tuple[Results, Lineage, Recorder, collections.Counter]:
    lin, rec, counters = lineage()
    teams = HostTeams(lambda ex, msg: True)
    return Results(lin, CostModel(), ScalingController(), MeasuredLoads(), teams, counters, None), lin, rec, counters


def done(dispatch_id: int, **kw: Any) -> m.Done:
    fields = dict(outputs={}, nulls=["y"], measured_s=0.5, wall_s=0.6, load_s=2.0, memory_used=7, cached_models=["k"])
    return m.Done(dispatch_id=dispatch_id, **{**fields, **kw})


def test_results_resolve_the_callers_future_and_learn_from_the_run():
    res, lin, rec, counters = results()
    heard: list[m.Done | m.Failed] = []
    res.listeners.append(heard.append)
    ex, j = executor(), job(1)
    lin.track(j)
    running_on(ex, j)

    res.finished(ex, done(1))

    assert j.future.result(0) == Result({}, ["y"], "e1", 0.5, 0.6, 1)
    assert ("complete", 0.5) in rec.calls and counters["completed"] == 1 and ex.completed == 1
    assert res.loads.measured == {"k": 2.0} and ex.cached_models == {"k"} and len(heard) == 1
    assert res.costs.measured("f", "k") == pytest.approx(0.5)
    assert lin.requests() == []


def test_results_tell_a_lost_input_from_a_failing_modelfn():
    res, lin, rec, counters = results()
    ex = executor()
    lost, failing, sibling = job(1, request="a"), job(2, request="b"), job(3, request="b")
    for j in (lost, failing, sibling):
        lin.track(j)
    running_on(ex, lost, failing)

    res.finished(ex, m.Failed(dispatch_id=1, error="E: gone", traceback="", measured_s=0.1, lost_input=True))
    res.finished(ex, m.Failed(dispatch_id=2, error="ValueError: bad", traceback="tb", measured_s=0.1))

    with pytest.raises(InputLost):
        lost.future.result(0)
    with pytest.raises(ModelFnError, match="failed on executor e1: ValueError: bad"):
        failing.future.result(0)
    with pytest.raises(RequestCancelled, match="another invocation failed"):
        sibling.future.result(0)
    assert counters["lost_inputs"] == 1 and counters["failed"] == 1


def test_results_of_an_aborted_dispatch_free_the_executor():
    res, lin, rec, counters = results()
    ex = executor(draining=True)
    ex.zombies.add(9)
    res.finished(ex, done(9))
    assert not ex.zombies and not ex.draining and counters["completed"] == 0


async def test_loop_readers_read_the_socket_only_while_awaiting():
    r, w = socket.socketpair()
    calls: list[Any] = []
    woken: list[bool] = []
    readers = LoopReaders(calls.append, lambda: woken.append(True), lambda: True)
    readers.fd = r.fileno()
    fut: cf.Future = cf.Future()
    threading.Timer(0.05, fut.set_result, ["answer"]).start()
    try:
        assert await readers.result(fut) == "answer"
        assert asyncio.get_running_loop() in readers
        await asyncio.sleep(0)  # the reader stops one loop step later (a chain of calls keeps it)
        assert not readers and woken == [True]
    finally:
        r.close()
        w.close()


# the worker ---------------------------------------------------------------------------------------


def test_worker_does_head_work_in_the_calling_thread_and_defers_nested_calls():
    order: list[str] = []
    exited: list[bool] = []
    worker = HeadWorker(lambda: False, lambda e: None, lambda: 0.01, lambda: False, lambda: exited.append(True))
    r, w = socket.socketpair()
    worker.start(r.fileno())
    try:
        here = threading.get_ident()

        def outer() -> None:
            order.append("outer" if threading.get_ident() == here else "elsewhere")
            worker.call(lambda: order.append("nested"))
            order.append("outer done")

        worker.call(outer)
        assert order == ["outer", "outer done", "nested"]
    finally:
        worker.stop()
        r.close()
        w.close()
    assert exited == [True] and not worker.running
    worker.call(lambda: order.append("after stop"))  # deferred: nobody runs head work any more
    assert order[-1] == "nested"


def test_worker_reports_a_bug_in_its_work_and_keeps_working():
    errors: list[Exception] = []
    steps = iter([RuntimeError("bug")])

    def step() -> bool:
        e = next(steps, None)
        if e is not None:
            raise e
        return False

    worker = HeadWorker(step, errors.append, lambda: 0.01, lambda: False, lambda: None)
    r, w = socket.socketpair()
    worker.start(r.fileno())
    try:
        worker.call(lambda: None)
        ran: list[bool] = []
        worker.call(lambda: ran.append(True))
        assert [str(e) for e in errors] == ["bug"] and ran == [True]
    finally:
        worker.stop()
        r.close()
        w.close()
