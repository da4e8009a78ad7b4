"""The orchestrator's side of the data plane (the process that runs the engine and calls ModelFns).

Inputs it creates itself (a latent it made, an image it loaded) are published into its own arena.
Outputs of ModelFns stay in their producer's arena: the caller pulls a private copy (the engine
needs the values) and keeps its reference while that copy is alive, so when the same tensor is
passed to the next ModelFn only its handle travels and the consumer pulls straight from the producer
(and placement favours the executor that already holds it). The reference is given up when the copy
is garbage-collected, or at once if the copy was modified in place (its bytes no longer match).

References are released from a queue drained on the next call, never from inside a finalizer: a
finalizer may run during garbage collection while a reference-count lock is held in the same thread.
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
import uuid
import weakref

import torch

from cluster.dataplane.arena import ShmArena
from cluster.dataplane.handle import TensorHandle
from cluster.dataplane.segments import SegmentError, safe_prefix
from cluster.dataplane.tensor_store import TensorStore, dtype_named


def _version(t: torch.Tensor) -> int:
    try:
        return t._version
    except RuntimeError:  # an inference tensor has no version counter: never assume it unchanged
        return -1


class CallerStore:
    def __init__(self, owner: str, arena_bytes: int = 64 << 20) -> None:
        self.owner, self.prefix = owner, safe_prefix(owner)
        self.arena = ShmArena(self.prefix, arena_bytes)
        self.store = TensorStore(self.arena, owner, self.prefix)
        self._pulled: dict[int, tuple[weakref.ref, TensorHandle, int]] = {}  # id(copy) -> (copy, handle, version)
        self._released: queue.SimpleQueue[TensorHandle] = queue.SimpleQueue()  # reentrant-safe put
        self._lock = threading.Lock()
        self.forwarded = 0

    # -- outputs ------------------------------------------------------------------------------
    def pull(self, handle: TensorHandle) -> torch.Tensor:
        """A private copy of a published tensor; the reference is kept while the copy lives."""
        # a normal tensor even inside inference mode, so in-place changes bump its version counter
        with torch.inference_mode(False):
            out = torch.empty(tuple(handle.shape), dtype=dtype_named(handle.dtype))
        self.store.pull_into(handle, out)  # shared memory on this host, the producer's data socket from another
        if handle.refs:
            key = id(out)
            with self._lock:
                self._pulled[key] = (weakref.ref(out), handle, out._version)
            weakref.finalize(out, self._forget, key)
        return out

    def _forget(self, key: int) -> None:
        entry = self._pulled.pop(key, None)  # dict.pop is atomic: no lock inside a finalizer
        if entry is not None:
            self._released.put(entry[1])

    def forwardable(self, t: torch.Tensor, live: set[str] | None = None) -> TensorHandle | None:
        """The producer's handle of `t` if `t` is an unmodified pulled copy whose producer is `live`."""
        entry = self._pulled.get(id(t))
        if entry is None or entry[0]() is not t:
            return None
        _, handle, version = entry
        if _version(t) != version or (live is not None and handle.owner not in live):
            return None
        return handle

    def release_dropped(self) -> None:
        """Give up the references of copies that were garbage-collected since the last call."""
        while True:
            try:
                handle = self._released.get_nowait()
            except queue.Empty:
                return
            self.release(handle)

    # -- inputs -------------------------------------------------------------------------------
    def hold(self, t: torch.Tensor, live: set[str] | None = None) -> TensorHandle:
        """A handle for `t` with one reference held by the caller until `release`: the producer's,
        retained once more, when `t` is a forwardable copy; else `t` published in this arena."""
        handle = self.forwardable(t, live)
        if handle is not None:
            try:
                self.store.retain(handle)
                self.forwarded += 1
                return handle
            except SegmentError:
                pass  # its producer freed it or was lost: send our own copy
        return self.store.publish(t, readers=1)

    def release(self, handle: TensorHandle) -> None:
        try:
            self.store.release(handle)
        except SegmentError:
            pass  # its producer is gone, and the tensor with it

    def collect(self) -> None:
        self.release_dropped()
        with self.store._lock:  # publish collects under the same lock
            self.store.collect()

    def drop_peer(self, prefix: str) -> None:
        """A producer was lost: forget the maps of its segments."""
        self.store.peers.drop_prefix(prefix)

    def close(self) -> None:
        self.store.close()
        self.arena.close()


_store: CallerStore | None = None
_store_lock = threading.Lock()


def caller_pulls() -> dict[str, int]:
    """How this process's caller store read other producers' outputs: through shared memory, over TCP."""
    stats = _store.store.stats if _store is not None else None
    return {
        "shm": stats.shm_pulls if stats else 0,
        "tcp": stats.tcp_pulls if stats else 0,
        "tcp_bytes": stats.tcp_bytes if stats else 0,
    }


def caller_store() -> CallerStore:
    """This process's caller store (created on first use, removed at exit)."""
    global _store
    with _store_lock:
        if _store is None:
            _store = CallerStore(f"c{os.getpid()}-{uuid.uuid4().hex[:6]}")
            atexit.register(_store.close)
        return _store
