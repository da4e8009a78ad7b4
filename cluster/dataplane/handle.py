"""`TensorHandle`: where a published tensor lives, the one description of a tensor the data plane hands out
and the control plane carries (cluster.messages' Dispatch inputs and Done outputs). A msgspec struct, so the
handle a producer publishes is the message field itself, with no conversion on either side."""

from __future__ import annotations

import msgspec


class TensorHandle(msgspec.Struct, frozen=True):
    segment: str  # the arena's name, or a spill segment's: the shared-memory segment that holds the bytes
    offset: int
    dtype: str  # torch dtype name without "torch."
    shape: tuple[int, ...]
    nbytes: int
    owner: str = ""  # the producer's id ("" = the caller); placement favours the executor holding it
    refs: str = ""  # the owner's reference-count table; "" = unmanaged (read as is, never freed here)
    slot: int = -1
    generation: int = 0
    pe: int = -1  # NVSHMEM PE of a GPU arena; -1 = host memory (arena or spill)
    host: str = ""  # the owner's host id (cluster.dataplane.remote.host_id: same host = shared memory)
    addr: str = ""  # the owner's data socket (tcp://IP:PORT) for pulls from another host; "" = none
