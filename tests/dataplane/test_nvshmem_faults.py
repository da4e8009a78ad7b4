"""What a first GPU run would hit in the NVSHMEM team, on the CPU against the stand-in that behaves as the real
library does there (tests/dataplane/fake_nvshmem.py): a failed init ends the process, a collective waits for
every member, an id is good for one team of the process that made it. Executors' team handling runs as it
does in serving (`Executor._join_team`, `_forget_head`); the head's side is `HostTeams`, as in the head."""

from __future__ import annotations

import contextlib
import shutil
import uuid

import pytest
import torch

from cluster import messages as m
from cluster.dataplane.arena import NvshmemArena, ShmArena
from cluster.dataplane.host_teams import HostTeams
from cluster.executor import process as executor_module
from cluster.executor.process import Executor


class Member:
    """The head's record of an executor, as HostTeams reads it."""

    def __init__(self, ex: Executor, host_id: str = "host-a") -> None:
        self.id, self.host_id, self.device = ex.id, host_id, ex.device


@pytest.fixture
def executors(fake_nvshmem, monkeypatch):
    """make() -> an executor that can join an NVSHMEM team (on the CPU: its arena's stream is the stand-in's)."""
    monkeypatch.setattr(torch.cuda, "Stream", lambda *a, **k: fake_nvshmem.FakeStream())
    made: list[Executor] = []

    def make() -> Executor:
        ex = Executor(
            "ipc:///nonexistent-head",
            "cpu",
            memory_budget=64 << 20,
            arena_bytes=1 << 20,
            executor_id=f"gpu-{uuid.uuid4().hex[:8]}",
            nvshmem=True,
        )
        made.append(ex)
        return ex

    yield make
    for ex in made:  # what an executor process's exit leaves (the stand-in's heaps are the test's)
        with contextlib.suppress(BaseException):
            ex.plane.store.close()
        if isinstance(ex.plane.arena, ShmArena):
            ex.plane.arena.close()
        shutil.rmtree(executor_module.WEIGHTS_DIR / ex.prefix.strip("-"), ignore_errors=True)


def record() -> tuple[list[tuple[str, m.Team]], HostTeams]:
    sent: list[tuple[str, m.Team]] = []
    return sent, HostTeams(lambda ex, msg: sent.append((ex.id, msg)) or True)


def serves_from_host_memory(ex: Executor) -> bool:
    x = torch.arange(6.0)
    with ex.plane.invocation() as inv:
        h = ex.plane.publish({"x": x})["x"]
        return isinstance(ex.plane.arena, ShmArena) and torch.equal(inv.inputs({"x": h})["x"], x)


def test_an_init_that_ends_the_process_is_not_retried_for_ever(nvshmem_team, fake_nvshmem, executors):
    """Item 3: NVSHMEM exits a process whose init failed, so the executor's own fallback never runs; its
    supervisor starts another, which registers again. The head counts joins lost that way on that GPU and,
    after max_failed_joins of them, offers no team: the next executor serves from host memory."""
    team = nvshmem_team(1)
    team.fail_init_on = {0}
    sent, teams = record()
    deaths = 0
    for _ in range(4):  # the supervisor's restarts
        ex = executors()
        sent.clear()
        teams.add(Member(ex))
        if not sent:
            break
        [(_, ticket)] = sent
        outcome = team.run_pes(lambda pe: ex._join_team(ticket), pes=[0])[0]
        assert isinstance(outcome, fake_nvshmem.ProcessEnded), outcome  # what the real library does
        deaths += 1
        teams.lose(ex.id)  # the head: lost during its join
    assert deaths == 2 and not sent, f"{deaths} executors died joining; the last was offered a team: {bool(sent)}"
    assert serves_from_host_memory(ex) and ex.id not in teams.members


def test_a_lost_member_dissolves_the_team_and_the_survivor_never_waits_for_it(nvshmem_team, fake_nvshmem, executors):
    """Item 4: free_tensor and finalize are collective; a member that crashed never calls them. The survivor
    leaves its team without them and serves from host memory."""
    team = nvshmem_team(2, deadline_s=3.0)
    a, b = executors(), executors()
    sent, teams = record()
    teams.add(Member(a))
    teams.add(Member(b))
    latest = dict(sent)  # the newest ticket of each (a's first one was replaced)
    joined = team.each_pe(lambda pe: (a, b)[pe]._join_team(latest[(a, b)[pe].id]))
    assert [r.error for r in joined] == ["", ""] and isinstance(a.plane.arena, NvshmemArena)
    sent.clear()
    teams.lose(b.id)  # b's process died: it will never reach a collective again
    [(to, msg)] = sent
    assert to == a.id
    outcome = team.run_pes(lambda pe: a._join_team(msg), pes=[0])[0]
    assert team.hangs == [], team.hangs
    assert outcome == m.TeamJoined(msg.generation)
    assert serves_from_host_memory(a)
    assert not a.plane.can_join()  # its NVSHMEM is still initialised: it registers as unable


def test_after_a_head_restart_the_executor_joins_with_an_id_from_the_live_head(nvshmem_team, fake_nvshmem, executors):
    """Item 5: the id of the old head's team was spent (and its listener died with that head). Every join
    after the restart uses an id the new head made."""
    team = nvshmem_team(1)
    ex = executors()
    sent, old_head = record()
    old_head.add(Member(ex))
    [(_, first)] = sent
    assert team.run_pes(lambda pe: ex._join_team(first), pes=[0])[0] == m.TeamJoined(first.generation)
    team.end_maker()  # the old head's process is gone
    outcome = team.run_pes(lambda pe: ex._forget_head(), pes=[0])[0]
    assert outcome is None, outcome
    assert isinstance(ex.plane.arena, ShmArena) and ex.plane.can_join()  # a team of one was left cleanly
    sent, new_head = record()
    new_head.add(Member(ex))  # it registers with the new head, able to join
    [(_, ticket)] = sent
    assert team.run_pes(lambda pe: ex._join_team(ticket), pes=[0])[0] == m.TeamJoined(ticket.generation)
    assert ticket.uid != first.uid and [i["uid"] for i in team.inits] == [first.uid, ticket.uid]
    assert team.init_failures == [] and isinstance(ex.plane.arena, NvshmemArena)


def test_after_a_head_restart_a_member_of_a_larger_team_serves_from_host_memory(nvshmem_team, executors):
    """Its team's other members may have stopped with the head: it leaves without the collectives, and
    registers as unable to join (a second NVSHMEM init without finalize is undefined)."""
    team = nvshmem_team(2, deadline_s=3.0)
    a, b = executors(), executors()
    sent, teams = record()
    teams.add(Member(a))
    teams.add(Member(b))
    latest = dict(sent)
    team.each_pe(lambda pe: (a, b)[pe]._join_team(latest[(a, b)[pe].id]))
    outcome = team.run_pes(lambda pe: a._forget_head(), pes=[0])[0]  # b stopped with the head
    assert outcome is None and team.hangs == []
    assert serves_from_host_memory(a) and not a.plane.can_join()


def test_a_team_step_that_never_returns_ends_the_process(executors, monkeypatch):
    """A join (or leave) waiting for a member that died cannot be interrupted in the process: past the step's
    deadline the watchdog exits it (a fresh process serves; the head counts a failed join on that GPU)."""
    import threading
    import time

    import zmq

    ex = executors()
    exits: list[int] = []

    def exit_(code: int) -> None:
        exits.append(code)
        ex._stop = True  # the process is gone: the watchdog's loop ends

    monkeypatch.setattr(executor_module.os, "_exit", exit_)
    ex._running = (executor_module.JOINING_TEAM,)
    ex._join_deadline = time.monotonic() - 1  # the step began more than its deadline ago
    ex._next_beat = float("inf")  # no head to beat to
    sock = zmq.Context.instance().socket(zmq.DEALER)
    watchdog = threading.Thread(target=ex._watch, args=(sock,), daemon=True)
    watchdog.start()
    watchdog.join(5)
    ex._stop = True
    watchdog.join(5)
    sock.close(0)
    assert exits == [5]
