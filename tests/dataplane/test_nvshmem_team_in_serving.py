"""The NVSHMEM team in serving, on the CPU: the head hands every GPU executor of a host a ticket (the team's
unique id, its rank, the team's size) when it registers, dispatches nothing to a member until it has joined,
forms the team again, renumbered, when one registers, and dissolves it when a member is lost. NVSHMEM itself needs a GPU: here its join and
leave are recorded instead (the call shapes of cluster.dataplane.nvshmem_team), and the arena that would be
on the NVSHMEM heap is host shared memory, so the executors' real processes of work run unchanged."""

from __future__ import annotations

import threading

import pytest
import torch

from cluster import messages as m
from cluster.cluster_runtime import ClusterRuntime
from cluster.control.head import Head
from cluster.dataplane import nvshmem_team
from cluster.dataplane.arena import ShmArena
from cluster.dataplane.host_teams import HostTeams
from cluster.dataplane.plane import ExecutorDataPlane
from cluster.executor.process import Executor
from tests.cluster.cluster_fns import tiny_ref
from tests.cluster.test_local_cluster import wait_until


class Member:
    def __init__(self, id: str, host_id: str = "host-a", device: str = "cuda:0") -> None:
        self.id, self.host_id, self.device = id, host_id, device


def test_tickets_renumber_the_members_and_wait_for_their_joins():
    sent: list[tuple[str, m.Team]] = []
    uids = iter([b"uid-1", b"uid-2", b"uid-3", b"uid-4"])
    teams = HostTeams(lambda ex, msg: sent.append((ex.id, msg)) or True, make_uid=lambda: next(uids))
    a, b, other_host = Member("a"), Member("b"), Member("c", "host-b")
    teams.add(a)
    assert sent == [("a", m.Team(b"uid-1", 0, 1, 1))] and teams.waiting("a")
    teams.joined("a", m.TeamJoined(1))
    assert not teams.waiting("a")
    sent.clear()
    teams.add(b)  # a new member: one new team, every member with its new ticket
    assert sent == [("a", m.Team(b"uid-2", 0, 2, 2)), ("b", m.Team(b"uid-2", 1, 2, 2))]
    teams.joined("a", m.TeamJoined(1))  # an answer to an older ticket counts for nothing
    assert teams.waiting("a") and teams.waiting("b")
    teams.add(other_host)  # another host, another team
    assert sent[-1] == ("c", m.Team(b"uid-3", 0, 1, 1)) and teams.generation("host-a") == 2
    sent.clear()
    teams.lose("a")  # a member is gone: the team is dissolved, b told to leave it alone
    assert sent == [("b", m.Team(b"", 0, 0, 3))] and not teams.waiting("a") and not teams.waiting("b")
    assert "b" not in teams.members and teams.generation("host-a") == 3
    teams.add(Member("d"))  # one registering later forms a new team
    assert sent[-1] == ("d", m.Team(b"uid-4", 0, 1, 4))
    teams.joined("d", m.TeamJoined(4, error="nvshmem init failed"))  # could not: leaves the team
    assert not teams.waiting("d") and "d" not in teams.members


@pytest.fixture
def recorded_nvshmem(monkeypatch):
    """NVSHMEM's join and leave recorded per thread (one executor per thread), arenas in host memory."""
    calls: dict[str, list] = {}

    def who() -> list:
        return calls.setdefault(threading.current_thread().name, [])

    monkeypatch.setattr(
        nvshmem_team, "join", lambda uid, rank, nranks, device: who().append(("join", uid, rank, nranks))
    )
    monkeypatch.setattr(nvshmem_team, "leave", lambda: who().append(("leave",)))
    made: list[ShmArena] = []

    def new_arena(self, nbytes: int, nvshmem: bool) -> ShmArena:
        # a name per arena: one standing for an abandoned NVSHMEM arena is never closed
        made.append(ShmArena(f"{self.prefix}{len(made)}-", nbytes))
        return made[-1]

    monkeypatch.setattr(ExecutorDataPlane, "_new_arena", new_arena)
    yield calls
    for arena in made:
        arena.close()


def test_executors_join_their_hosts_team_and_reform_it_when_one_is_lost(recorded_nvshmem, tmp_path):
    import tests.cluster.cluster_fns  # noqa: F401  (registers the ModelFns the executors run)

    uids = iter(b"uid-%d" % i for i in range(1, 10))
    # the second executor leaves by saying goodbye; a 1 s heartbeat gap on a loaded machine must not drop either
    head = Head(f"ipc://{tmp_path}/head.sock", heartbeat_s=0.1, lost_after_s=10.0).start()
    head.teams.make_uid = lambda: next(uids)
    executors, threads = [], []
    try:
        for name in ("pe-a", "pe-b"):
            ex = Executor(head.address, "cpu", memory_budget=256 << 20, executor_id=name, heartbeat_s=0.1, nvshmem=True)
            executors.append(ex)
            threads.append(threading.Thread(target=ex.run, name=name, daemon=True))
            threads[-1].start()
            wait_until(lambda: name in head.executors and not head.executors[name].draining)
        # pe-b's join does not wait for pe-a's re-join here (the stand-in join is not collective)
        wait_until(lambda: len(recorded_nvshmem["pe-a"]) >= 3 and not head.executors["pe-a"].draining)
        assert recorded_nvshmem["pe-a"] == [("join", b"uid-1", 0, 1), ("leave",), ("join", b"uid-2", 0, 2)]
        assert recorded_nvshmem["pe-b"] == [("join", b"uid-2", 1, 2)]
        wait_until(lambda: not head.executors["pe-a"].draining)
        assert {e["id"]: e["nvshmem_team"] for e in head.stats()["executors"]} == {"pe-a": 2, "pe-b": 2}
        # both serve, from their (re-formed) arenas
        rt = ClusterRuntime(head)
        x = torch.randn(2, 16)
        y = rt.call_sync("cc_test_linear", tiny_ref(1), {"x": x})["y"]
        assert torch.equal(y, torch.tanh(tiny_linear(1)(x)))
        executors[1].stop()  # pe-b goes: the team is dissolved, pe-a leaves it without its collectives
        threads[1].join(10)
        wait_until(lambda: head.stats()["executors"][0]["nvshmem_team"] == 0 and not head.executors["pe-a"].draining)
        assert recorded_nvshmem["pe-a"] == [("join", b"uid-1", 0, 1), ("leave",), ("join", b"uid-2", 0, 2)]
        assert recorded_nvshmem["pe-b"] == [("join", b"uid-2", 1, 2)]  # nor did pe-b's exit finalise
        assert not executors[0].plane.can_join()
        assert torch.equal(rt.call_sync("cc_test_linear", tiny_ref(1), {"x": x})["y"], y)
    finally:
        head.stop()
        for t in threads:
            t.join(10)


def tiny_linear(seed: int) -> torch.nn.Linear:
    torch.manual_seed(seed)
    return torch.nn.Linear(16, 16)
