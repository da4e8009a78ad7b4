"""The communication arena: one fixed region per executor, carved by a buddy allocator.

Two backends behind one interface. `ShmArena` (CPU) is a named shared-memory segment that any
process of the host maps to pull from. `NvshmemArena` (GPU) is one buffer on NVSHMEM's symmetric
heap (same offset on every PE), pulled with a one-sided `get`; it needs nvshmem4py and a CUDA
device and is imported lazily. The region never grows: when it is full the caller spills (see
tensor_store) rather than waiting, since an arena that waits for space can deadlock the cluster.
"""

from __future__ import annotations

import contextlib
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

    name: str  # how peers find it: a segment name (CPU) or "nvshmem-<pe>" (GPU)
    device: torch.device
    pe: int = -1  # NVSHMEM processing element, -1 for host memory

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

    def write(self, offset: int, tensor: torch.Tensor) -> None:
        """Copy `tensor` into arena bytes at `offset`; peers may read them as soon as this returns."""
        self.view(offset, tensor.dtype, tuple(tensor.shape)).copy_(tensor)

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
        return self._base[offset : offset + nbytes].view(dtype).view(shape)

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
        src = memoryview(mm)[offset : offset + nbytes]
        try:
            if out.device.type == "cpu":
                out.reshape(-1).view(torch.uint8).numpy()[:] = src
            else:
                # a host handle pulled into device memory (a GPU arena): stage on the host, then one copy
                # up (a synchronous one, so the segment may be unmapped when this returns)
                staged = torch.empty(nbytes, dtype=torch.uint8)
                staged.numpy()[:] = src
                out.reshape(-1).view(torch.uint8).copy_(staged)
        finally:
            src.release()


class NvshmemArena(Arena):
    """GPU memory: one symmetric allocation on the NVSHMEM heap for the arena's life, pulled one-sidedly.

    Every executor of the NVSHMEM team must create its arena with the same size, in the same order
    after `nvshmem.core.init` (the allocation is collective), so an offset names the same block on
    every PE. Facts of nvshmem4py 0.4.1 this follows (its nvshmem/core/rma.py and interop/torch.py):
    get/quiet exist only on a stream (stream=None raises NotImplementedError); a torch tensor is
    resolved to its NVSHMEM buffer by the exact data_ptr of an allocation (a slice raises
    NvshmemInvalid, and the allocation itself stands for all of it), while a `cuda.core.Buffer` is used
    as it is. So a block is named by a Buffer over its local symmetric address, which NVSHMEM maps to
    the same offset of the remote PE's heap.
    """

    def __init__(self, size: int, min_block: int = 4096, stream: Any = None) -> None:
        super().__init__(size, min_block)
        import nvshmem.core as nvshmem  # optional dependency: nvshmem4py (the gpu extra)
        from cuda.core import Buffer  # what nvshmem4py itself imports (cuda-core >= 0.5)

        self._nv, self._buffer = nvshmem, Buffer
        self.pe = nvshmem.my_pe()
        self.name = f"nvshmem-{self.pe}"
        self._heap = nvshmem.tensor((self.capacity,), dtype=torch.uint8)
        self._base = self._heap.data_ptr()
        self.device = self._heap.device
        # nvshmem4py has no stream-less transfers: pulls and publishes run on a stream of the arena's own.
        # nvshmem4py reads a stream through the CUDA stream protocol (__cuda_stream__), which torch's
        # streams implement only in recent releases: older ones are wrapped.
        self.stream = stream if stream is not None else torch.cuda.Stream(self.device)
        self.rma_stream = self.stream if hasattr(self.stream, "__cuda_stream__") else _StreamProtocol(self.stream)

    def view(self, offset: int, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
        nbytes = element_count(shape) * torch.empty((), dtype=dtype).element_size()
        if offset < 0 or offset + nbytes > self.capacity:
            raise SegmentError(f"[{offset}, +{nbytes}) is outside the arena of {self.capacity}")
        return self._heap[offset : offset + nbytes].view(dtype).view(shape)

    def write(self, offset: int, tensor: torch.Tensor) -> None:
        dst = self.view(offset, tensor.dtype, tuple(tensor.shape))
        self._after_compute()  # the tensor was made on the compute stream
        with self._on_stream():
            dst.copy_(tensor)
        # Peers pull as soon as they hold the handle, on their own streams: the bytes must have landed
        # before publish hands it out.
        self.stream.synchronize()

    def pull(self, src: Any, out: torch.Tensor) -> None:
        nbytes = src.nbytes
        if src.offset < 0 or src.offset + nbytes > self.capacity:
            raise SegmentError(f"[{src.offset}, +{nbytes}) is outside the symmetric arena of {self.capacity}")
        if out.device != self.device or not out.is_contiguous() or out.numel() * out.element_size() != nbytes:
            raise SegmentError(f"cannot pull {nbytes} bytes into a {tuple(out.shape)} {out.dtype} on {out.device}")
        if nbytes == 0:
            return
        remote = self._buffer.from_handle(ptr=self._base + src.offset, size=nbytes)
        # `out` is local device memory (a block of this arena or a spill): NVSHMEM reaches it over
        # P2P/NVLink; a transport through a NIC would need it registered first.
        local = self._buffer.from_handle(ptr=out.data_ptr(), size=nbytes)
        self._after_compute()  # the block may still be read by work queued before it was freed
        self._nv.get(local, remote, remote_pe=src.pe, stream=self.rma_stream)
        self._nv.quiet(stream=self.rma_stream)
        # The store checks the handle's generation after the pull: the bytes must be here by then.
        self.stream.synchronize()

    def _after_compute(self) -> None:
        if self.device.type == "cuda":
            self.stream.wait_stream(torch.cuda.current_stream(self.device))

    def _on_stream(self) -> contextlib.AbstractContextManager:
        return torch.cuda.stream(self.stream) if self.device.type == "cuda" else contextlib.nullcontext()

    def close(self) -> None:
        self._nv.free_tensor(self._heap)


class _StreamProtocol:
    """The CUDA stream protocol over a torch stream that lacks it (its handle is `cuda_stream`)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.stream.cuda_stream)
