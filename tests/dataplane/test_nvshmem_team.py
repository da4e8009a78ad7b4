"""Joining an NVSHMEM team by unique id (no MPI), checked against the nvshmem4py stand-in: the id's
bytes survive the trip, and init gets the device, rank and size nvshmem4py 0.4.1 expects."""

from __future__ import annotations

import uuid

import pytest
import torch

from cluster.dataplane.arena import NvshmemArena, ShmArena
from cluster.dataplane.nvshmem_team import TeamPlan, Ticket, join, leave, new_unique_id
from cluster.dataplane.plane import ExecutorDataPlane
from cluster.dataplane.segments import SegmentError


def test_a_unique_id_travels_as_bytes_and_every_member_joins_with_it(nvshmem_team):
    team = nvshmem_team(2)
    uid = new_unique_id()
    assert len(uid) == 128 and uid.strip(b"\0")
    team.each_pe(lambda rank: join(uid, rank, 2, device=rank))
    assert sorted((i["rank"], i["nranks"], i["device"], i["current"]) for i in team.inits) == [
        (0, 2, 0, 0),
        (1, 2, 1, 1),
    ]
    assert all(i["uid"] == uid for i in team.inits)
    team.each_pe(lambda rank: leave())
    assert team.finalized == 2


def test_the_stand_in_is_as_strict_as_nvshmem_about_ids_collectives_and_failed_inits(nvshmem_team, fake_nvshmem):
    """What the fixes for a dead member, a spent id and a failed init rest on: were the stand-in laxer than
    NVSHMEM, tests of those paths would pass against code that hangs or dies on a GPU."""
    team = nvshmem_team(2, deadline_s=0.5)
    uid = new_unique_id()
    alone = team.run_pes(lambda rank: join(uid, rank, 2, device=0), pes=[0])  # PE 1 never joins
    assert isinstance(alone[0], fake_nvshmem.Hang)
    team = nvshmem_team(1)
    uid = new_unique_id()
    join(uid, 0, 1, device=0)
    leave()
    join(uid, 0, 1, device=0)  # the id's listener took its one join and closed
    with pytest.raises(fake_nvshmem.ProcessEnded):  # the failed init is swallowed; the next call exits
        NvshmemArena(1 << 16, stream=fake_nvshmem.FakeStream())
    other = new_unique_id()
    team.end_maker()  # the process that made it is gone
    join(other, 0, 1, device=0)
    with pytest.raises(fake_nvshmem.ProcessEnded):
        team.tensor((4,))
    assert len(team.init_failures) == 2


def test_a_malformed_id_or_rank_is_refused_before_nvshmem_sees_it(nvshmem_team):
    team = nvshmem_team(2)
    with pytest.raises(ValueError):
        join(b"short", 0, 2, device=0)
    with pytest.raises(ValueError):
        join(new_unique_id(), 2, 2, device=0)
    assert team.inits == []


def test_a_team_plan_renumbers_the_members_under_a_new_id_whenever_one_joins_and_dissolves_on_a_loss():
    ids = iter([b"a" * 128, b"b" * 128, b"c" * 128])
    plan = TeamPlan(make_uid=lambda: next(ids))
    first = plan.form(["e1", "e2", "e3"])
    assert [(t.rank, t.nranks, t.generation) for t in first.values()] == [(0, 3, 1), (1, 3, 1), (2, 3, 1)]
    assert {t.uid for t in first.values()} == {b"a" * 128}
    grown = plan.add("e4")  # a new member: a new team with it last
    assert {m: (t.rank, t.nranks) for m, t in grown.items()} == {"e1": (0, 4), "e2": (1, 4), "e3": (2, 4), "e4": (3, 4)}
    assert {t.uid for t in grown.values()} == {b"b" * 128} and grown["e1"].generation == 2
    assert plan.dissolve() == ["e1", "e2", "e3", "e4"]  # a fixed team cannot lose a PE
    assert plan.members == [] and plan.generation == 3
    again = plan.add("e5")
    assert again == {"e5": Ticket(b"c" * 128, 0, 1, 4)}


def planes(team, fake_nvshmem, tmp_path, tickets):
    """An executor plane per ticket, each joining as the PE of its rank (collective: one thread each)."""
    names = list(tickets)
    made = team.each_pe(
        lambda pe: ExecutorDataPlane(
            names[pe] + uuid.uuid4().hex[:6],
            1 << 26,
            1 << 20,
            "cpu",
            weights_dir=tmp_path / names[pe],
            team=tickets[names[pe]],
            arena_stream=fake_nvshmem.FakeStream(),
        ),
        pes=list(range(len(names))),
    )
    return dict(zip(names, made))


def test_executor_planes_join_the_team_and_pull_from_each_other(nvshmem_team, fake_nvshmem, tmp_path):
    team = nvshmem_team(2)
    plan = TeamPlan()
    p = planes(team, fake_nvshmem, tmp_path, plan.form(["e0", "e1"]))
    try:
        assert sorted((i["rank"], i["nranks"]) for i in team.inits) == [(0, 2), (1, 2)]
        assert isinstance(p["e0"].arena, NvshmemArena) and p["e1"].arena.pe == 1
        src = torch.randn(8, 8)
        with team.as_pe(0):
            h = p["e0"].publish({"x": src})["x"]
        with team.as_pe(1), p["e1"].invocation() as inv:
            assert torch.equal(inv.inputs({"x": h})["x"], src)
        assert team.gets == [(1, 0, h.nbytes)]
    finally:
        # an executor closes its plane when its process ends, alone: no collective that would wait for the others
        for pe, plane in enumerate(p.values()):
            with team.as_pe(pe):
                plane.close()
    assert team.finalized == 0 and team.hangs == []


def test_a_new_member_re_forms_the_team_and_handles_of_the_old_team_are_stale(nvshmem_team, fake_nvshmem, tmp_path):
    team = nvshmem_team(3)
    plan = TeamPlan()
    p = planes(team, fake_nvshmem, tmp_path, plan.form(["e0", "e1"]))
    with team.as_pe(0):
        old = p["e0"].publish({"x": torch.ones(4)})["x"]
    tickets = plan.add("e2")
    # the old members free their arenas and finalise together, then all three join
    joined = team.each_pe(
        lambda pe: (
            p[f"e{pe}"].reform(tickets[f"e{pe}"])
            if pe < 2
            else ExecutorDataPlane(
                "e2" + uuid.uuid4().hex[:6],
                1 << 26,
                1 << 20,
                "cpu",
                weights_dir=tmp_path / "e2",
                team=tickets["e2"],
                arena_stream=fake_nvshmem.FakeStream(),
            )
        )
    )
    p["e2"] = joined[2]
    assert team.finalized == 2 and [i["nranks"] for i in team.inits[-3:]] == [3, 3, 3]
    assert all(len(team.heaps[pe]) == 1 for pe in range(3))  # the old arenas freed, one new one each
    with team.as_pe(0), p["e0"].invocation() as inv:
        with pytest.raises(SegmentError):  # the old team's reference table is gone
            inv.inputs({"x": old})
    with team.as_pe(2):
        h = p["e2"].publish({"y": torch.arange(3.0)})["y"]
    with team.as_pe(0), p["e0"].invocation() as inv:
        assert torch.equal(inv.inputs({"y": h})["y"], torch.arange(3.0))
    for pe in range(3):
        with team.as_pe(pe):
            p[f"e{pe}"].close()


def test_a_member_left_without_the_collectives_serves_from_host_memory_and_joins_no_team_again(
    nvshmem_team, fake_nvshmem, tmp_path
):
    team = nvshmem_team(2, deadline_s=2.0)
    plan = TeamPlan()
    p = planes(team, fake_nvshmem, tmp_path, plan.form(["e0", "e1"]))
    with team.as_pe(0):
        old = p["e0"].publish({"x": torch.ones(4)})["x"]
    plan.dissolve()  # e1 is gone: it will never free or finalise with e0
    with team.as_pe(0):
        p["e0"].reform(None, intact=False)
        assert isinstance(p["e0"].arena, ShmArena) and team.hangs == [] and team.finalized == 0
        with p["e0"].invocation() as inv:
            with pytest.raises(SegmentError):
                inv.inputs({"x": old})
            h = p["e0"].publish({"y": torch.arange(3.0)})["y"]
            assert torch.equal(inv.inputs({"y": h})["y"], torch.arange(3.0))
        assert not p["e0"].can_join()  # NVSHMEM is still initialised here: a second init is undefined
        with pytest.raises(RuntimeError, match="cannot join"):
            p["e0"].reform(plan.add("e0")["e0"])
        p["e0"].close()
    assert team.inits[-1]["nranks"] == 2  # no init was tried


def test_the_gpu_checks_two_pe_exchange_runs_its_protocol_against_the_stand_in(nvshmem_team, fake_nvshmem):
    # scripts/gpu_nvshmem_pair.py's per-PE steps, the two PEs as threads of one process on the CPU
    import importlib.util
    import queue
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "gpu_nvshmem_pair.py"
    spec = importlib.util.spec_from_file_location("cc_gpu_nvshmem_pair", path)
    pair = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pair)
    team = nvshmem_team(2)
    uid_q, inboxes = queue.Queue(), [queue.Queue(), queue.Queue()]
    results = team.each_pe(
        lambda rank: pair.exchange(rank, 2, "cpu", uid_q, inboxes, big=1 << 20, stream=fake_nvshmem.FakeStream())
    )
    assert [ok for ok, _ in results] == [True, True], results
    # both tensors came through the symmetric heaps (none spilled to host memory)
    assert sorted((me, peer) for me, peer, _ in team.gets) == [(0, 1), (0, 1), (1, 0), (1, 0)]
    assert team.finalized == 2 and team.heaps == {0: [], 1: []}


def test_a_consumer_that_is_no_pe_reads_an_nvshmem_arena_over_the_producers_data_socket(
    nvshmem_team, fake_nvshmem, tmp_path
):
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
        assert host.store.stats.tcp_pulls == 1 and team.gets == []  # not through NVSHMEM
    finally:
        host.close()
        with team.as_pe(0):
            p.close()
