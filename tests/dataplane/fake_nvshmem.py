"""A CPU stand-in for nvshmem4py 0.4.1 (`nvshmem.core`) and `cuda.core`, enforcing the call shapes their
source documents, so the GPU arena's use of them is checked without a GPU.

What it enforces, from nvshmem4py 0.4.1's nvshmem/core/rma.py, interop/torch.py and memory.py:
- `get`/`get_nbi`/`quiet` take a stream; `stream=None` raises NotImplementedError (there are no stream-less
  transfers), and the stream is read through the CUDA stream protocol (`stream.__cuda_stream__()[1]`);
- a torch tensor resolves to its NVSHMEM buffer only by the exact `data_ptr` of an allocation, and then
  stands for the whole allocation; any other tensor raises NvshmemInvalid. A `cuda.core.Buffer` is used as it
  is. `get` copies min(src.size, dst.size) bytes;
- `src` of a get is a local symmetric address: the same offset of the remote PE's allocation is read.
- `tensor`/`free_tensor` are collective: every PE allocates in the same order (here each PE of the team
  allocates under `team.as_pe(pe)`);
- the unique id is a `bindings.uniqueid` struct (128 bytes of `bindings.uniqueid_dtype`) at `.ptr`;
  `get_unique_id(empty=True)` is zeroed; `init` takes device, uid, rank, nranks, initializer_method="uid".
Transfers and barriers are queued on the stream and happen when the stream is synchronised, as the host
sees a real one; PEs may run as threads of one process (`as_pe` is per thread).
"""
from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
import types
from typing import Any, Callable, Iterator

import numpy as np
import torch

UNIQUEID_DTYPE = np.dtype([("version", "<i4"), ("internal", "i1", (124,))])


class UniqueId:
    def __init__(self) -> None:
        self.data = np.zeros(1, dtype=UNIQUEID_DTYPE)

    @property
    def ptr(self) -> int:
        return self.data.ctypes.data


class Device:
    """cuda.core.Device: an index that can be made current."""
    current: int | None = None

    def __init__(self, device_id: int = 0) -> None:
        self.device_id = device_id

    def set_current(self) -> None:
        Device.current = self.device_id


class NvshmemInvalid(Exception):
    pass


class Buffer:
    """cuda.core.Buffer: a pointer and a size (from_handle never frees)."""

    def __init__(self, ptr: int, size: int, mr: Any = None) -> None:
        self.handle, self.size, self.memory_resource = ptr, size, mr

    @classmethod
    def from_handle(cls, ptr: int, size: int, mr: Any = None) -> "Buffer":
        return cls(int(ptr), int(size), mr)


class FakeStream:
    """A CUDA stream as the host sees it: work queued on it runs when it is synchronised."""

    def __init__(self) -> None:
        self.queue: list[Callable[[], None]] = []
        self.syncs = 0

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, id(self))

    def synchronize(self) -> None:
        for op in self.queue:
            op()
        self.queue.clear()
        self.syncs += 1


class Team:
    """`n` PEs in one process; `as_pe(pe)` says which one is calling."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.heaps: dict[int, list[torch.Tensor]] = {pe: [] for pe in range(n)}
        self._local = threading.local()
        self.gets: list[tuple[int, int, int]] = []   # (calling PE, remote PE, bytes)
        self._barrier = threading.Barrier(n)          # PEs running as threads meet here
        self.inits: list[dict] = []                   # init's arguments, the id as bytes
        self.finalized = 0

    @contextlib.contextmanager
    def as_pe(self, pe: int) -> Iterator[None]:
        before = getattr(self._local, "pe", 0)
        self._local.pe = pe
        try:
            yield
        finally:
            self._local.pe = before

    def my_pe(self) -> int:
        return getattr(self._local, "pe", 0)

    def n_pes(self) -> int:
        return self.n

    # -- setup ----------------------------------------------------------------------------------

    def get_unique_id(self, empty: bool = False) -> UniqueId:
        uid = UniqueId()
        if not empty:
            uid.data["version"] = 1
            uid.data["internal"] = np.random.default_rng().integers(-128, 127, 124, dtype=np.int8)
        return uid

    def init(self, device: Any = None, uid: Any = None, rank: int | None = None, nranks: int | None = None,
             mpi_comm: Any = None, initializer_method: str = "") -> None:
        if initializer_method != "uid" or uid is None or rank is None or nranks is None or mpi_comm:
            raise NvshmemInvalid(f"Invalid parameters for UID based init {uid} {rank} {nranks}")
        self.inits.append({"device": device.device_id, "current": Device.current, "rank": rank, "nranks": nranks,
                           "uid": ctypes.string_at(uid.ptr, UNIQUEID_DTYPE.itemsize)})

    def finalize(self) -> None:
        self.finalized += 1

    # -- memory ---------------------------------------------------------------------------------

    def tensor(self, shape: tuple[int, ...], dtype: torch.dtype = torch.float32, **_: Any) -> torch.Tensor:
        t = torch.zeros(shape, dtype=dtype)
        self.heaps[self.my_pe()].append(t)
        return t

    def tensor_get_buffer(self, t: torch.Tensor) -> tuple[Buffer, int, str]:
        for alloc in self.heaps[self.my_pe()]:
            if alloc.data_ptr() == t.data_ptr():
                n = alloc.numel() * alloc.element_size()
                return Buffer(alloc.data_ptr(), n, self), n, str(t.dtype)
        raise NvshmemInvalid("Tried to retrieve buffer from Tensor not tracked by nvshmem")

    def free_tensor(self, t: torch.Tensor) -> None:
        self.tensor_get_buffer(t)
        heap = self.heaps[self.my_pe()]
        heap[:] = [a for a in heap if a.data_ptr() != t.data_ptr()]

    # -- transfers ------------------------------------------------------------------------------

    def _resolve(self, obj: Any) -> Buffer:
        if isinstance(obj, torch.Tensor):
            return self.tensor_get_buffer(obj)[0]
        if isinstance(obj, Buffer):
            return obj
        raise NvshmemInvalid("Invalid memory objects passed to NVSHMEM operation")

    def _symmetric(self, ptr: int, size: int) -> tuple[int, int]:
        """(allocation index, offset) of a local symmetric address range."""
        for k, alloc in enumerate(self.heaps[self.my_pe()]):
            base, n = alloc.data_ptr(), alloc.numel() * alloc.element_size()
            if base <= ptr and ptr + size <= base + n:
                return k, ptr - base
        raise NvshmemInvalid(f"source {ptr:#x}+{size} is not on this PE's symmetric heap")

    def get(self, dst: Any, src: Any, remote_pe: int = -1, stream: Any = None) -> None:
        d, s = self._resolve(dst), self._resolve(src)
        if stream is None:
            raise NotImplementedError
        stream.__cuda_stream__()
        if not 0 <= remote_pe < self.n:
            raise NvshmemInvalid(f"no PE {remote_pe}")
        size = min(s.size, d.size)
        k, off = self._symmetric(s.handle, size)
        remote = self.heaps[remote_pe][k]
        src_ptr, dst_ptr = remote.data_ptr() + off, d.handle
        self.gets.append((self.my_pe(), remote_pe, size))
        stream.queue.append(lambda: ctypes.memmove(dst_ptr, src_ptr, size))

    def quiet(self, stream: Any = None) -> None:
        if stream is None:
            raise NotImplementedError
        stream.__cuda_stream__()

    def barrier_all(self, stream: Any = None) -> None:
        """On the stream, as nvshmem4py's: the host goes on, the stream waits for every PE's barrier."""
        if stream is None:
            raise NvshmemInvalid("Stream may not be None for barrier_all")
        stream.__cuda_stream__()
        stream.queue.append(lambda: self._barrier.wait(timeout=30))

    # -- installing -----------------------------------------------------------------------------

    def install(self, monkeypatch: Any) -> None:
        """Put `nvshmem.core` and `cuda.core` (with Buffer) into sys.modules for the test's duration."""
        core = types.ModuleType("nvshmem.core")
        for name in ("my_pe", "n_pes", "tensor", "tensor_get_buffer", "free_tensor", "get", "quiet",
                     "get_unique_id", "init", "finalize", "barrier_all"):
            setattr(core, name, getattr(self, name))
        core.get_nbi = self.get
        core.NvshmemInvalid = NvshmemInvalid
        bindings = types.ModuleType("nvshmem.bindings")
        bindings.uniqueid_dtype = UNIQUEID_DTYPE
        pkg = types.ModuleType("nvshmem")
        pkg.core, pkg.bindings = core, bindings
        cuda_core = types.ModuleType("cuda.core")
        cuda_core.Buffer, cuda_core.Device = Buffer, Device
        cuda = sys.modules.get("cuda") or types.ModuleType("cuda")
        for name, mod in (("nvshmem", pkg), ("nvshmem.core", core), ("nvshmem.bindings", bindings),
                          ("cuda.core", cuda_core)):
            monkeypatch.setitem(sys.modules, name, mod)
        if "cuda" not in sys.modules:
            monkeypatch.setitem(sys.modules, "cuda", cuda)
        monkeypatch.setattr(cuda, "core", cuda_core, raising=False)
