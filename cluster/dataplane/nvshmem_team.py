"""Joining an NVSHMEM team without MPI (executors are started by us, not by mpirun).

One process (the head) makes the unique id; its bytes travel over the control plane; each member
initialises with the id, its rank and the team's size (nvshmem4py 0.4.1's "uid" initializer). The
id is nvshmem4py's `uniqueid` struct, whose bytes are read and written through its pointer and the
size of `nvshmem.bindings.uniqueid_dtype`. The team is fixed at init: a member that joins means a new
team (every member finalises and initialises again with a new id). An id is good for one team only: its
listener lives in the process that made it and accepts exactly `nranks` joins. NVSHMEM has no way to leave a
team one of whose members is gone (free and finalize are collective), and a process whose init fails is
ended by the library; cluster.dataplane.host_teams decides what follows from both.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass


def new_unique_id() -> bytes:
    """A fresh team id as bytes (loads the NVSHMEM host library, needs no GPU)."""
    import nvshmem.bindings as bindings
    import nvshmem.core as nvshmem

    uid = nvshmem.get_unique_id()
    return ctypes.string_at(uid.ptr, bindings.uniqueid_dtype.itemsize)


def join(uid: bytes, rank: int, nranks: int, device: int) -> None:
    """Initialise NVSHMEM in this process as PE `rank` of `nranks` on CUDA device `device` (collective:
    every member calls it with the same id; it returns once all have)."""
    import nvshmem.bindings as bindings
    import nvshmem.core as nvshmem
    from cuda.core import Device

    if len(uid) != bindings.uniqueid_dtype.itemsize:
        raise ValueError(f"an NVSHMEM unique id has {bindings.uniqueid_dtype.itemsize} bytes, got {len(uid)}")
    if not 0 <= rank < nranks:
        raise ValueError(f"rank {rank} is not in a team of {nranks}")
    dev = Device(device)
    dev.set_current()
    empty = nvshmem.get_unique_id(empty=True)
    ctypes.memmove(empty.ptr, uid, len(uid))
    nvshmem.init(device=dev, uid=empty, rank=rank, nranks=nranks, initializer_method="uid")


def leave() -> None:
    """Finalise NVSHMEM in this process (collective, after every symmetric allocation was freed)."""
    import nvshmem.core as nvshmem

    nvshmem.finalize()


def available() -> bool:
    """nvshmem4py is importable here (the gpu extra): the NVSHMEM data plane can serve."""
    try:
        import nvshmem.core  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class Ticket:
    """What one member needs to join a team: the team's id, its rank and the team's size. `generation`
    counts the team's re-formings: handles of an older generation name arenas that are gone."""

    uid: bytes
    rank: int
    nranks: int
    generation: int


class TeamPlan:
    """The head's side: which executors form the NVSHMEM team, with which ranks. The team is fixed at
    init, so a new member forms a new team: a new id, the members in the order they joined, the generation
    counted up; every member then frees its arena and finalises together with the others, and joins again
    with its new ticket. A lost member cannot be left that way (the collectives would wait for it), so the
    team is dissolved instead. Tensors in the old arenas are gone (their consumers see stale handles and the
    head re-runs their producers)."""

    def __init__(self, make_uid: Callable[[], bytes] = new_unique_id) -> None:
        self.make_uid = make_uid
        self.members: list[str] = []
        self.generation = 0
        self.tickets: dict[str, Ticket] = {}

    def form(self, members: list[str]) -> dict[str, Ticket]:
        """A new team of `members` (in rank order); returns every member's ticket."""
        if len(set(members)) != len(members):
            raise ValueError(f"a member twice in {members}")
        self.members = list(members)
        self.generation += 1
        uid = self.make_uid() if members else b""
        self.tickets = {m: Ticket(uid, r, len(members), self.generation) for r, m in enumerate(members)}
        return dict(self.tickets)

    def add(self, member: str) -> dict[str, Ticket]:
        """`member` (new or respawned) joins: everyone forms a new team with it last."""
        return self.form([m for m in self.members if m != member] + [member])

    def dissolve(self) -> list[str]:
        """The team lost a member: no team any more; returns the members it had."""
        members, self.members, self.tickets = self.members, [], {}
        self.generation += 1
        return members
