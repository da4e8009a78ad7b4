"""Joining an NVSHMEM team without MPI (executors are started by us, not by mpirun).

One process (the head) makes the unique id; its bytes travel over the control plane; each member
initialises with the id, its rank and the team's size (nvshmem4py 0.4.1's "uid" initializer). The
id is nvshmem4py's `uniqueid` struct, whose bytes are read and written through its pointer and the
size of `nvshmem.bindings.uniqueid_dtype`. The team is fixed at init: a member that leaves or joins
means a new team (every member finalises and initialises again with a new id).
"""
from __future__ import annotations

import ctypes


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
