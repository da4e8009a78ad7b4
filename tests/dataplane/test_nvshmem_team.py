"""Joining an NVSHMEM team by unique id (no MPI), checked against the nvshmem4py stand-in: the id's
bytes survive the trip, and init gets the device, rank and size nvshmem4py 0.4.1 expects."""
from __future__ import annotations

import uuid

import pytest
import torch

from cluster.dataplane.arena import NvshmemArena, ShmArena
from cluster.dataplane.nvshmem_team import TeamPlan, join, leave, new_unique_id
from cluster.dataplane.plane import ExecutorDataPlane
from cluster.dataplane.segments import SegmentError


def test_a_unique_id_travels_as_bytes_and_every_member_joins_with_it(nvshmem_team):
    team = nvshmem_team(2)
    uid = new_unique_id()
    assert len(uid) == 128 and uid.strip(b"\0")
    for rank in (0, 1):
        join(uid, rank, 2, device=rank)
    assert [(i["rank"], i["nranks"], i["device"], i["current"]) for i in team.inits] == [(0, 2, 0, 0), (1, 2, 1, 1)]
    assert all(i["uid"] == uid for i in team.inits)
    leave()
    assert team.finalized == 1


def test_a_malformed_id_or_rank_is_refused_before_nvshmem_sees_it(nvshmem_team):
    team = nvshmem_team(2)
    with pytest.raises(ValueError):
        join(b"short", 0, 2, device=0)
    with pytest.raises(ValueError):
        join(new_unique_id(), 2, 2, device=0)
    assert team.inits == []


def test_a_team_plan_renumbers_the_members_under_a_new_id_whenever_they_change():
    ids = iter([b"a" * 128, b"b" * 128, b"c" * 128])
    plan = TeamPlan(make_uid=lambda: next(ids))
    first = plan.form(["e1", "e2", "e3"])
    assert [(t.rank, t.nranks, t.generation) for t in first.values()] == [(0, 3, 1), (1, 3, 1), (2, 3, 1)]
    assert {t.uid for t in first.values()} == {b"a" * 128}
    lost = plan.lose("e2")                     # a fixed team cannot lose a PE: the survivors re-form
    assert {m: (t.rank, t.nranks) for m, t in lost.items()} == {"e1": (0, 2), "e3": (1, 2)}
    assert {t.uid for t in lost.values()} == {b"b" * 128} and lost["e1"].generation == 2
    back = plan.add("e2")                      # a respawned executor joins through a new team
    assert {m: t.rank for m, t in back.items()} == {"e1": 0, "e3": 1, "e2": 2}
    assert back["e2"].uid == b"c" * 128 and back["e2"].nranks == 3


def planes(team, fake_nvshmem, tmp_path, tickets):
    made = {}
    for pe, (member, ticket) in enumerate(tickets.items()):
        with team.as_pe(pe):
            made[member] = ExecutorDataPlane(member + uuid.uuid4().hex[:6], 1 << 26, 1 << 20, "cpu",
                                             weights_dir=tmp_path / member, team=ticket,
                                             arena_stream=fake_nvshmem.FakeStream())
    return made


def test_executor_planes_join_the_team_and_pull_from_each_other(nvshmem_team, fake_nvshmem, tmp_path):
    team = nvshmem_team(2)
    plan = TeamPlan()
    p = planes(team, fake_nvshmem, tmp_path, plan.form(["e0", "e1"]))
    try:
        assert [(i["rank"], i["nranks"]) for i in team.inits] == [(0, 2), (1, 2)]
        assert isinstance(p["e0"].arena, NvshmemArena) and p["e1"].arena.pe == 1
        src = torch.randn(8, 8)
        with team.as_pe(0):
            h = p["e0"].publish({"x": src})["x"]
        with team.as_pe(1), p["e1"].invocation() as inv:
            assert torch.equal(inv.inputs({"x": h})["x"], src)
        assert team.gets == [(1, 0, h.nbytes)]
    finally:
        for pe, plane in enumerate(p.values()):
            with team.as_pe(pe):
                plane.close()
    assert team.finalized == 2


def test_a_plane_re_forms_its_team_and_handles_of_the_old_team_are_stale(nvshmem_team, fake_nvshmem, tmp_path):
    team = nvshmem_team(2)
    plan = TeamPlan()
    p = planes(team, fake_nvshmem, tmp_path, plan.form(["e0", "e1"]))
    with team.as_pe(0):
        old = p["e0"].publish({"x": torch.ones(4)})["x"]
    with team.as_pe(1):
        p["e1"].close()                           # e1 is lost
    survivor = plan.lose("e1")["e0"]
    with team.as_pe(0):
        p["e0"].reform(survivor)
        assert team.finalized == 2 and team.inits[-1]["nranks"] == 1 and team.inits[-1]["uid"] == survivor.uid
        assert len(team.heaps[0]) == 1            # the old arena was freed, one new one allocated
        with p["e0"].invocation() as inv:
            with pytest.raises(SegmentError):     # the old team's reference table is gone
                inv.inputs({"x": old})
            h = p["e0"].publish({"y": torch.arange(3.0)})["y"]
            assert torch.equal(inv.inputs({"y": h})["y"], torch.arange(3.0))
        p["e0"].reform(None)                      # back to shared memory
        assert isinstance(p["e0"].arena, ShmArena) and team.finalized == 3
        p["e0"].close()


def test_the_gpu_checks_two_pe_exchange_runs_its_protocol_against_the_stand_in(nvshmem_team, fake_nvshmem):
    # scripts/gpu_nvshmem_pair.py's per-PE steps, the two PEs as threads of one process on the CPU
    import importlib.util
    import queue
    import threading
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "scripts" / "gpu_nvshmem_pair.py"
    spec = importlib.util.spec_from_file_location("cc_gpu_nvshmem_pair", path)
    pair = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pair)
    team = nvshmem_team(2)
    uid_q, inboxes, results = queue.Queue(), [queue.Queue(), queue.Queue()], {}

    def run(rank: int) -> None:
        with team.as_pe(rank):
            results[rank] = pair.exchange(rank, 2, "cpu", uid_q, inboxes, big=1 << 20,
                                          stream=fake_nvshmem.FakeStream())

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [results[r][0] for r in range(2)] == [True, True], results
    # both tensors came through the symmetric heaps (none spilled to host memory)
    assert sorted((me, peer) for me, peer, _ in team.gets) == [(0, 1), (0, 1), (1, 0), (1, 0)]
    assert team.finalized == 2 and team.heaps == {0: [], 1: []}


def test_a_consumer_that_is_no_pe_reads_an_nvshmem_arena_over_the_producers_data_socket(
        nvshmem_team, fake_nvshmem, tmp_path):
    """The caller (and any executor with a host arena) is no PE of the team: it cannot `get` from the
    symmetric heap, so it reads a PE's tensor over that producer's data socket, staged through host memory."""
    team = nvshmem_team(1)
    p = planes(team, fake_nvshmem, tmp_path, TeamPlan().form(["e0"]))["e0"]
    host = ExecutorDataPlane("h" + uuid.uuid4().hex[:6], 1 << 26, 1 << 20, "cpu", weights_dir=tmp_path / "h")
    try:
        p.store.serve("127.0.0.1", None)
        src = torch.randn(8, 8)
        with team.as_pe(0):
            h = p.publish({"x": src})["x"]
        assert h.pe == 0 and h.addr.startswith("tcp://127.0.0.1:")
        with host.invocation() as inv:
            assert torch.equal(inv.inputs({"x": h})["x"], src)
        assert host.store.stats.tcp_pulls == 1 and team.gets == []   # not through NVSHMEM
    finally:
        host.close()
        with team.as_pe(0):
            p.close()
