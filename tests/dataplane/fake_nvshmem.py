"""A CPU stand-in for nvshmem4py 0.4.1 (`nvshmem.core`) and `cuda.core`, enforcing the call shapes their
source documents, so the GPU arena's use of them is checked without a GPU.

What it enforces, from nvshmem4py 0.4.1's nvshmem/core/rma.py, interop/torch.py and memory.py:
- `get`/`get_nbi`/`quiet` take a stream; `stream=None` raises NotImplementedError (there are no stream-less
  transfers), and the stream is read through the CUDA stream protocol (`stream.__cuda_stream__()[1]`);
- a torch tensor resolves to its NVSHMEM buffer only by the exact `data_ptr` of an allocation, and then
  stands for the whole allocation; any other tensor raises NvshmemInvalid. A `cuda.core.Buffer` is used as it
  is. `get` copies min(src.size, dst.size) bytes;
- `src` of a get is a local symmetric address: the same offset of the remote PE's allocation is read.
- the unique id is a `bindings.uniqueid` struct (128 bytes of `bindings.uniqueid_dtype`) at `.ptr`;
  `get_unique_id(empty=True)` is zeroed; `init` takes device, uid, rank, nranks, initializer_method="uid".
And what NVSHMEM 3.x itself does (bootstrap_uid.cpp, init.cu; nvshmem4py's `free` docstring):
- an id is good for one team: its listener lives in the process that made it (`end_maker` stands for that
  process ending) and accepts exactly `nranks` joins, then closes. A join with a spent, dead or unknown id
  fails;
- a failed init is swallowed, and the next NVSHMEM call ends the process: here it raises `ProcessEnded`;
  `fail_init_on` makes the init of chosen PEs fail;
- `init`, `tensor`, `free_tensor`, `finalize` (and a stream's `barrier_all`) are collective: each returns
  once every member of the caller's team has made the same call. A member that never does hangs the others;
  here they raise `Hang` after `deadline_s`. Both are BaseExceptions: code under test cannot catch them and
  carry on, as it could not return from the real wait or exit. PEs that never called `init` form one team
  of all `n` (the arena tests allocate without joining).
Transfers and barriers are queued on the stream and happen when the stream is synchronised, as the host
sees a real one; PEs run as threads of one process (`as_pe` is per thread; `run_pes` runs one per PE).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

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
    """cuda.core.Device: an index that can be made current. CUDA keeps the current device per host
    thread, and each PE here is a thread standing for a process: so is the stand-in's."""

    _local = threading.local()

    def __init__(self, device_id: int = 0) -> None:
        self.device_id = device_id

    def set_current(self) -> None:
        Device._local.current = self.device_id

    @staticmethod
    def current() -> int | None:
        return getattr(Device._local, "current", None)


class NvshmemInvalid(Exception):
    pass


class Hang(BaseException):
    """A collective that some member of the team never reached: the real library waits for ever."""


class ProcessEnded(BaseException):
    """NVSHMEM ended the calling process (NVSHMEMI_ERROR_EXIT after a failed init)."""


class Buffer:
    """cuda.core.Buffer: a pointer and a size (from_handle never frees)."""

    def __init__(self, ptr: int, size: int, mr: Any = None) -> None:
        self.handle, self.size, self.memory_resource = ptr, size, mr

    @classmethod
    def from_handle(cls, ptr: int, size: int, mr: Any = None) -> Buffer:
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

    def __init__(self, n: int, deadline_s: float = 10.0) -> None:
        self.n = n
        self.deadline_s = deadline_s
        self.heaps: dict[int, list[torch.Tensor]] = {pe: [] for pe in range(n)}
        self._local = threading.local()
        self.gets: list[tuple[int, int, int]] = []  # (calling PE, remote PE, bytes)
        self.inits: list[dict] = []  # init's arguments, the id as bytes
        self.finalized = 0
        self.uids: dict[bytes, dict] = {}  # every id made: its maker's pid, joins, whether it lives
        self.team_of: dict[int, bytes] = {}  # PE -> the id of the team it joined
        self.nranks: dict[bytes, int] = {}
        self.fail_init_on: set[int] = set()  # PEs whose init fails
        self.failed: set[int] = set()  # PEs whose init failed: their next call ends them
        self.init_failures: list[str] = []
        self.ended: list[int] = []  # PEs whose process NVSHMEM ended
        self.hangs: list[str] = []
        self._cond = threading.Condition()
        self._seq: dict[tuple[bytes, int], int] = {}
        self._arrivals: dict[tuple[bytes, int], dict[int, str]] = {}

    @contextlib.contextmanager
    def as_pe(self, pe: int) -> Iterator[None]:
        before = getattr(self._local, "pe", 0)
        self._local.pe = pe
        try:
            yield
        finally:
            self._local.pe = before

    def run_pes(self, fn: Callable[[int], Any], pes: list[int] | None = None) -> dict[int, Any]:
        """fn(pe) in a thread per PE, as that PE; what each returned or raised (BaseExceptions too). A thread
        still running after twice the deadline is reported as a Hang."""
        out: dict[int, Any] = {}

        def run(pe: int) -> None:
            with self.as_pe(pe):
                try:
                    out[pe] = fn(pe)
                except BaseException as e:
                    out[pe] = e

        threads = {
            pe: threading.Thread(target=run, args=(pe,), daemon=True) for pe in (range(self.n) if pes is None else pes)
        }
        for t in threads.values():
            t.start()
        for pe, t in threads.items():
            t.join(2 * self.deadline_s)
            if t.is_alive():
                out[pe] = Hang(f"PE {pe} still running after {2 * self.deadline_s:g} s")
        return out

    def each_pe(self, fn: Callable[[int], Any], pes: list[int] | None = None) -> list[Any]:
        """`run_pes`, raising what a PE raised; the results in PE order."""
        out = self.run_pes(fn, pes)
        for result in out.values():
            if isinstance(result, BaseException):
                raise result
        return [out[pe] for pe in sorted(out)]

    def _pe(self) -> int:
        return getattr(self._local, "pe", 0)

    def _alive(self) -> int:
        """The calling PE, unless its failed init ends its process now."""
        pe = self._pe()
        if pe in self.failed:
            self.failed.discard(pe)
            self.ended.append(pe)
            raise ProcessEnded(f"PE {pe}: NVSHMEM was not initialised (its init failed): the process exits")
        return pe

    def my_pe(self) -> int:
        return self._alive()

    def n_pes(self) -> int:
        self._alive()
        return self.nranks.get(self.team_of.get(self._pe(), b""), self.n)

    def _team(self, pe: int) -> tuple[bytes, int]:
        key = self.team_of.get(pe, b"world")
        return key, self.nranks.get(key, self.n)

    def _collective(self, op: str, pe: int, key: bytes, size: int) -> None:
        """Return once every member of team `key` (of `size`) has made this call, its next collective."""
        with self._cond:
            seq = self._seq.get((key, pe), 0)
            self._seq[(key, pe)] = seq + 1
            arrivals = self._arrivals.setdefault((key, seq), {})
            arrivals[pe] = op
            self._cond.notify_all()
            if not self._cond.wait_for(lambda: len(arrivals) >= size, timeout=self.deadline_s):
                why = (
                    f"PE {pe}'s {op} (collective {seq} of its team) waited {self.deadline_s:g} s: only PEs "
                    f"{sorted(arrivals)} of {size} came"
                )
                self.hangs.append(why)
                raise Hang(why)
        if len(set(arrivals.values())) > 1:
            raise NvshmemInvalid(f"collective {seq} of a team is not the same call on every PE: {arrivals}")

    # -- setup ----------------------------------------------------------------------------------

    def get_unique_id(self, empty: bool = False) -> UniqueId:
        uid = UniqueId()
        if not empty:
            uid.data["version"] = 1
            uid.data["internal"] = np.random.default_rng().integers(-128, 127, 124, dtype=np.int8)
            self.uids[ctypes.string_at(uid.ptr, UNIQUEID_DTYPE.itemsize)] = {
                "pid": os.getpid(),
                "joins": 0,
                "alive": True,
            }
        return uid

    def end_maker(self) -> None:
        """The process that made every id so far has ended (a head stopped): their listeners are gone."""
        for made in self.uids.values():
            made["alive"] = False

    def init(
        self,
        device: Any = None,
        uid: Any = None,
        rank: int | None = None,
        nranks: int | None = None,
        mpi_comm: Any = None,
        initializer_method: str = "",
    ) -> None:
        if initializer_method != "uid" or uid is None or rank is None or nranks is None or mpi_comm:
            raise NvshmemInvalid(f"Invalid parameters for UID based init {uid} {rank} {nranks}")
        pe = self._alive()
        raw = ctypes.string_at(uid.ptr, UNIQUEID_DTYPE.itemsize)
        self.inits.append(
            {"device": device.device_id, "current": Device.current(), "rank": rank, "nranks": nranks, "uid": raw}
        )
        made = self.uids.get(raw)
        why = (
            "the id was never made by get_unique_id"
            if made is None
            else "the process that made the id is gone"
            if not made["alive"]
            else f"the id's listener already took its {nranks} joins and closed"
            if made["joins"] >= nranks
            else "this PE's init fails"
            if pe in self.fail_init_on
            else pe in self.team_of and "NVSHMEM is initialised in this process already"
        )
        if why:
            self.failed.add(pe)  # init.cu swallows it; the next call exits
            self.init_failures.append(f"PE {pe}: {why}")
            return
        made["joins"] += 1
        self.nranks[raw] = nranks
        self._collective("init", pe, raw, nranks)
        self.team_of[pe] = raw

    def finalize(self) -> None:
        pe = self._alive()
        if pe not in self.team_of:
            raise NvshmemInvalid(f"PE {pe}: finalize without init")
        self._collective("finalize", pe, *self._team(pe))
        del self.team_of[pe]
        self.finalized += 1

    # -- memory ---------------------------------------------------------------------------------

    def tensor(self, shape: tuple[int, ...], dtype: torch.dtype = torch.float32, **_: Any) -> torch.Tensor:
        pe = self._alive()
        self._collective("tensor", pe, *self._team(pe))
        t = torch.zeros(shape, dtype=dtype)
        self.heaps[pe].append(t)
        return t

    def tensor_get_buffer(self, t: torch.Tensor) -> tuple[Buffer, int, str]:
        for alloc in self.heaps[self._pe()]:
            if alloc.data_ptr() == t.data_ptr():
                n = alloc.numel() * alloc.element_size()
                return Buffer(alloc.data_ptr(), n, self), n, str(t.dtype)
        raise NvshmemInvalid("Tried to retrieve buffer from Tensor not tracked by nvshmem")

    def free_tensor(self, t: torch.Tensor) -> None:
        pe = self._alive()
        self.tensor_get_buffer(t)
        self._collective("free_tensor", pe, *self._team(pe))
        heap = self.heaps[pe]
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
        for k, alloc in enumerate(self.heaps[self._pe()]):
            base, n = alloc.data_ptr(), alloc.numel() * alloc.element_size()
            if base <= ptr and ptr + size <= base + n:
                return k, ptr - base
        raise NvshmemInvalid(f"source {ptr:#x}+{size} is not on this PE's symmetric heap")

    def get(self, dst: Any, src: Any, remote_pe: int = -1, stream: Any = None) -> None:
        self._alive()
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
        self.gets.append((self._pe(), remote_pe, size))
        stream.queue.append(lambda: ctypes.memmove(dst_ptr, src_ptr, size))

    def quiet(self, stream: Any = None) -> None:
        self._alive()
        if stream is None:
            raise NotImplementedError
        stream.__cuda_stream__()

    def barrier_all(self, stream: Any = None) -> None:
        """On the stream, as nvshmem4py's: the host goes on, the stream waits for every PE's barrier."""
        pe = self._alive()
        if stream is None:
            raise NvshmemInvalid("Stream may not be None for barrier_all")
        stream.__cuda_stream__()
        team = self._team(pe)
        stream.queue.append(lambda: self._collective("barrier_all", pe, *team))

    # -- installing -----------------------------------------------------------------------------

    def install(self, monkeypatch: Any) -> None:
        """Put `nvshmem.core` and `cuda.core` (with Buffer) into sys.modules for the test's duration."""
        core = types.ModuleType("nvshmem.core")
        for name in (
            "my_pe",
            "n_pes",
            "tensor",
            "tensor_get_buffer",
            "free_tensor",
            "get",
            "quiet",
            "get_unique_id",
            "init",
            "finalize",
            "barrier_all",
        ):
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
        for name, mod in (
            ("nvshmem", pkg),
            ("nvshmem.core", core),
            ("nvshmem.bindings", bindings),
            ("cuda.core", cuda_core),
        ):
            monkeypatch.setitem(sys.modules, name, mod)
        if "cuda" not in sys.modules:
            monkeypatch.setitem(sys.modules, "cuda", cuda)
        monkeypatch.setattr(cuda, "core", cuda_core, raising=False)
