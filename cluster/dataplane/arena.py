"""The communication arena: one fixed region per executor, carved by a buddy allocator.

Two backends behind one interface. `ShmArena` (CPU) is a named shared-memory segment that any
process of the host maps to pull from. `NvshmemArena` (GPU) is one buffer on NVSHMEM's symmetric
heap (same offset on every PE), pulled with a one-sided `get`; it needs nvshmem4py and a CUDA
device and is imported lazily. The region never grows: when it is full the caller spills (see
tensor_store) rather than waiting, since an arena that waits for space can deadlock the cluster.
"""
from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import torch

from cluster.dataplane import segments
from cluster.dataplane.native_buddy import make_allocator
from cluster.dataplane.segments import SegmentError


@dataclass(frozen=True)
class Block:
    offset: int
    size: int  # the power-of-two block, >= the bytes asked for


def element_count(shape: tuple[int, ...] | list[int]) -> int:
    n = 1
    for d in shape:
        if d < 0:
            raise SegmentError(f"bad shape {shape}")
        n *= d
    return n


class Arena(ABC):
    """The data plane's interface: a fixed region of `capacity` bytes owned by one executor, which peers
    read without the control plane (shared memory on a CPU host, NVSHMEM's symmetric heap on GPUs).
    `alloc`/`free` hand out blocks (thread-safe); `view` is a tensor over a block, no copy; `pull`
    copies a peer's block into one of ours."""

    name: str           # how peers find it: a segment name (CPU) or "nvshmem-<pe>" (GPU)
    device: torch.device
    pe: int = -1         # NVSHMEM processing element, -1 for host memory

    def __init__(self, size: int, min_block: int) -> None:
        self._alloc = make_allocator(size, min_block)
        self.capacity = self._alloc.capacity
        self._lock = threading.Lock()  # blocks are freed from any thread (lazy fetches, collect)

    def alloc(self, nbytes: int) -> Block | None:
        with self._lock:
            off = self._alloc.alloc(nbytes)
            return None if off is None else Block(off, self._alloc.size_of(off))

    def free(self, block: Block) -> None:
        with self._lock:
            self._alloc.free(block.offset)

    @property
    def free_bytes(self) -> int:
        with self._lock:
            return self._alloc.free_bytes

    @property
    def used_bytes(self) -> int:
        return self.capacity - self.free_bytes

    @abstractmethod
    def view(self, offset: int, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
        """A tensor over arena bytes [offset, offset + nbytes) — no copy."""

    @abstractmethod
    def pull(self, src: Any, out: torch.Tensor) -> None:
        """Copy the bytes a peer's handle `src` names into `out` (a view of this arena or a spill)."""

    @abstractmethod
    def close(self) -> None:
        """Give the region back (unlink the segment, free the symmetric heap). Views of it must not be used
        afterwards, and handles to its blocks are dead."""


class ShmArena(Arena):
    """Host memory: a segment `<prefix>arena` that same-host peers map read-only and copy from."""

    device = torch.device("cpu")

    def __init__(self, prefix: str, size: int, min_block: int = 4096) -> None:
        super().__init__(size, min_block)
        self.name = f"{prefix}arena"
        self._mm = segments.create(self.name, self.capacity)
        self._base = torch.frombuffer(self._mm, dtype=torch.uint8)
        self.peers = segments.PeerMaps()

    def view(self, offset: int, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
        nbytes = element_count(shape) * torch.empty((), dtype=dtype).element_size()
        if offset < 0 or offset + nbytes > self.capacity:
            raise SegmentError(f"[{offset}, +{nbytes}) is outside the arena of {self.capacity}")
        return self._base[offset:offset + nbytes].view(dtype).view(shape)

    def pull(self, src: Any, out: torch.Tensor) -> None:
        copy_from_segment(self.peers, src.segment, src.offset, src.nbytes, out)

    def close(self) -> None:
        self._base = None
        self.peers.close()
        segments.unlink(self.name)


def copy_from_segment(peers: segments.PeerMaps, segment: str, offset: int, nbytes: int, out: torch.Tensor) -> None:
    """memcpy `nbytes` at `offset` of a host segment into `out` (CPU, contiguous), bounds-checked."""
    mm = peers.get(segment)
    if offset < 0 or nbytes != out.numel() * out.element_size() or offset + nbytes > len(mm):
        raise SegmentError(f"[{offset}, +{nbytes}) does not fit segment {segment} of {len(mm)} bytes")
    if nbytes:
        src = memoryview(mm)[offset:offset + nbytes]
        try:
            out.reshape(-1).view(torch.uint8).numpy()[:] = src
        finally:
            src.release()


class NvshmemArena(Arena):
    """GPU memory: one uint8 tensor on the NVSHMEM symmetric heap, pulled one-sidedly.

    Every executor of the NVSHMEM team must create its arena with the same size, in the same order
    after `nvshmem.core.init`, so an offset names the same block on every PE.
    """

    def __init__(self, size: int, min_block: int = 4096, stream: Any = None) -> None:
        super().__init__(size, min_block)
        import nvshmem.core as nvshmem  # optional dependency: nvshmem4py (the gpu extra)
        self._nv = nvshmem
        self.pe = nvshmem.my_pe()
        self.name = f"nvshmem-{self.pe}"
        self._heap = nvshmem.tensor((self.capacity,), dtype=torch.uint8)
        self.device = self._heap.device
        self._stream = stream

    def view(self, offset: int, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
        nbytes = element_count(shape) * torch.empty((), dtype=dtype).element_size()
        if offset < 0 or offset + nbytes > self.capacity:
            raise SegmentError(f"[{offset}, +{nbytes}) is outside the arena of {self.capacity}")
        return self._heap[offset:offset + nbytes].view(dtype).view(shape)

    def pull(self, src: Any, out: torch.Tensor) -> None:
        # The source is the peer's copy of the same symmetric slice: same offset, remote PE.
        remote = self._heap[src.offset:src.offset + src.nbytes]
        self._nv.get(out.reshape(-1).view(torch.uint8), remote, remote_pe=src.pe, stream=self._stream)
        self._nv.quiet(stream=self._stream)

    def close(self) -> None:
        self._nv.free_tensor(self._heap)
