"""Joining an NVSHMEM team by unique id (no MPI), checked against the nvshmem4py stand-in: the id's
bytes survive the trip, and init gets the device, rank and size nvshmem4py 0.4.1 expects."""
from __future__ import annotations

import pytest

from cluster.dataplane.nvshmem_team import join, leave, new_unique_id


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
