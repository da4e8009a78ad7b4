"""Producer -> consumer tensor movement through executor arenas, with reference counts.

A producer `publish`es an output: the bytes go into its own arena (or, when the arena is full even
after reclaiming dead tensors and asking `on_pressure` to evict arena-resident weights, into a
one-off host segment: spilling never waits) and a `TensorHandle` describes them. Only the handle
travels through the control plane. A consumer `pull`s one-sidedly into its own arena (or a plain
framework tensor when its arena is full) and `release`s the handle, decrementing the count in the
producer's shared table; the producer frees the block on its next `collect`. A `LazyFetch` is the
ModelFn callback input: a zero-argument callable that waits for the handle and pulls on first call.
A producer on another host (or any other producer, with `--data-plane tcp`) is read through its data
socket instead of its segments, with the same handles and counts (cluster.dataplane.remote).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Union

import torch

from cluster.dataplane import remote, segments
from cluster.dataplane.arena import Arena, Block, copy_from_segment, element_count
from cluster.dataplane.handle import TensorHandle
from cluster.dataplane.refcounts import RefClient, RefTable
from cluster.dataplane.segments import SegmentError

SPILL_TAG = "spill-"  # in the names of one-off host segments (arena full)


def dtype_named(name: str) -> torch.dtype:
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise SegmentError(f"bad dtype {name!r}")
    return dt


def _nbytes(dtype: torch.dtype, shape: tuple[int, ...]) -> int:
    return element_count(shape) * torch.empty((), dtype=dtype).element_size()


@dataclass
class StoreStats:
    published: int = 0
    spilled_out: int = 0  # outputs that went to a host spill segment (arena full)
    pulled: int = 0
    spilled_in: int = 0  # inputs pulled into framework memory (arena full)
    reclaimed: int = 0
    pull_bytes: int = 0
    pull_s: float = 0.0
    shm_pulls: int = 0  # inputs of other producers copied from their segments (same host)
    tcp_pulls: int = 0  # inputs of other producers received over their data sockets
    tcp_bytes: int = 0
    tcp_s: float = 0.0


class TensorStore:
    """One executor's side of the data plane: its arena, its reference table and its peers."""

    def __init__(
        self, arena: Arena, owner: str, prefix: str, slots: int = 4096, on_pressure: Callable[[int], int] | None = None
    ) -> None:
        self.arena, self.owner, self.prefix = arena, owner, prefix
        self.on_pressure = on_pressure  # (bytes wanted) -> bytes freed in the arena, e.g. evict weights
        self.table = RefTable(f"{prefix}refs", slots)
        self.clients = RefClient()
        self.peers = segments.PeerMaps()
        self.stats = StoreStats()
        self._storage: dict[int, Block | str] = {}  # slot -> arena block or spill segment name
        self._spill_ids = itertools.count()
        self._lock = threading.Lock()
        self.host = remote.host_id()
        self.secret: bytes | None = None  # proves this store's requests to other hosts' data servers
        self.server: remote.DataServer | None = None
        self._remote: remote.RemotePeers | None = None

    def serve(self, ip: str, secret: bytes | None, port: int = 0) -> str:
        """Serve this store's tensors to other hosts on `ip` (once; `port` 0: any free one); returns the data
        socket's address."""
        self.secret = secret
        if self.server is None:
            self.server = remote.DataServer(self, ip, secret, port)
        return self.server.address

    @property
    def addr(self) -> str:
        return self.server.address if self.server is not None else ""

    def _remote_for(self, handle: TensorHandle) -> remote.RemotePeers | None:
        """The client for `handle`'s producer when it is read over TCP: from another host (cluster.dataplane.
        remote.over_tcp), or from an NVSHMEM arena when this store is no PE of a team (the caller, a host-arena
        executor): its data socket stages the bytes through host memory."""
        if not remote.over_tcp(handle, self.owner) and not (handle.pe >= 0 and self.arena.pe < 0):
            return None
        if self._remote is None:
            self._remote = remote.RemotePeers(self.secret)
        return self._remote

    # -- producer side ------------------------------------------------------------------------

    def _alloc(self, nbytes: int) -> Block | None:
        block = self.arena.alloc(nbytes)
        if block is None and self.collect():
            block = self.arena.alloc(nbytes)
        if block is None and self.on_pressure is not None and self.on_pressure(nbytes) > 0:
            block = self.arena.alloc(nbytes)
        return block

    def publish(self, tensor: torch.Tensor, readers: int = 1) -> TensorHandle:
        """Copy `tensor` into this executor's arena for `readers` consumers; returns its handle."""
        t = tensor.detach()
        dtype_name = str(t.dtype).removeprefix("torch.")
        shape, nbytes = tuple(t.shape), t.numel() * t.element_size()
        with self._lock:
            slot, gen = self.table.take(readers)
            block = self._alloc(nbytes)
            if block is not None:
                self.arena.write(block.offset, t)  # landed when it returns: the handle may leave
                self._storage[slot] = block
                seg, off, pe = self.arena.name, block.offset, self.arena.pe
            else:
                seg, off, pe = self._spill(t, nbytes), 0, -1
                self._storage[slot] = seg
                self.stats.spilled_out += 1
            self.stats.published += 1
        return TensorHandle(
            seg, off, dtype_name, shape, nbytes, self.owner, self.table.name, slot, gen, pe, self.host, self.addr
        )

    def _spill(self, t: torch.Tensor, nbytes: int) -> str:
        name = f"{self.prefix}{SPILL_TAG}{next(self._spill_ids)}"
        mm = segments.create(name, nbytes)
        if nbytes:
            torch.frombuffer(mm, dtype=torch.uint8, count=nbytes).copy_(t.reshape(-1).view(torch.uint8).cpu())
        return name

    def collect(self) -> int:
        """Free the storage of every tensor whose readers have all released it; returns how many."""
        dead = self.table.dead()
        for slot in dead:
            where = self._storage.pop(slot)
            if isinstance(where, Block):
                self.arena.free(where)
            else:
                segments.unlink(where)
            self.table.recycle(slot)
        self.stats.reclaimed += len(dead)
        return len(dead)

    # -- consumer side ------------------------------------------------------------------------

    def pull(self, handle: TensorHandle, scope: Scope) -> torch.Tensor:
        """Copy the tensor into this executor's memory (arena block owned by `scope`, or a spill)."""
        dtype = dtype_named(handle.dtype)
        shape = tuple(handle.shape)
        if _nbytes(dtype, shape) != handle.nbytes:
            raise SegmentError(f"handle {handle} is inconsistent")
        block = self._alloc(handle.nbytes)
        if block is not None and not (self.arena.device.type != "cpu" and self._remote_for(handle)):
            scope.blocks.append(block)
            out = self.arena.view(block.offset, dtype, shape)
        else:  # the arena is full; or a GPU arena, and the bytes come from a socket (the scope moves them)
            if block is not None:
                self.arena.free(block)
            out = torch.empty(shape, dtype=dtype, device=self.arena.device if handle.pe >= 0 else "cpu")
            self.stats.spilled_in += block is None
        self.pull_into(handle, out)
        return out

    def pull_into(self, handle: TensorHandle, out: torch.Tensor) -> None:
        """Copy the tensor `handle` names into `out` (contiguous, of its size): from the producer's segment
        on this host, or over its data socket (cluster.dataplane.remote.over_tcp)."""
        t0 = time.perf_counter()
        peer = self._remote_for(handle)
        if peer is not None:
            # straight into `out`; the server checked the generation and held a reference while sending,
            # so the bytes are the live tensor's
            peer.pull(handle, out)
            self.stats.tcp_pulls += 1
            self.stats.tcp_bytes += handle.nbytes
            self.stats.tcp_s += time.perf_counter() - t0
        else:
            self.check(handle)
            if handle.pe >= 0:
                self.arena.pull(handle, out)
            else:
                copy_from_segment(self.peers, handle.segment, handle.offset, handle.nbytes, out)
                if SPILL_TAG in handle.segment:
                    self.peers.drop(handle.segment)  # a one-off segment: keeping its map would pin its memory
            # If the producer freed the block while we copied, the generation moved: fail, not garbage.
            self.check(handle)
            if handle.owner != self.owner:
                self.stats.shm_pulls += 1
        self.stats.pulled += 1
        self.stats.pull_bytes += handle.nbytes
        self.stats.pull_s += time.perf_counter() - t0

    def check(self, handle: TensorHandle) -> None:
        """Raise `StaleHandle` (a SegmentError) when `handle`'s tensor was freed."""
        if handle.refs:
            peer = self._remote_for(handle)
            if peer is not None:
                peer.check(handle)
            else:
                self.clients.check(handle.refs, handle.slot, handle.generation)

    def add_readers(self, handle: TensorHandle, delta: int) -> int:
        """Change `handle`'s reader count by `delta` in its producer's table, wherever it is."""
        if not handle.refs:
            return -1
        peer = self._remote_for(handle)
        if peer is not None:
            return peer.add(handle, delta)
        return self.clients.add(handle.refs, handle.slot, handle.generation, delta)

    def release(self, handle: TensorHandle) -> int:
        """This reader is done with `handle`; returns how many readers are left (-1: unmanaged)."""
        return self.add_readers(handle, -1)

    def retain(self, handle: TensorHandle, readers: int = 1) -> int:
        """Register more readers (a consumer the DAG added after publishing)."""
        return self.add_readers(handle, readers)

    def scope(self, device: torch.device | None = None) -> Scope:
        return Scope(self, device)

    def close(self) -> None:
        """Drop every tensor and the reference table (the arena is closed by its owner)."""
        if self.server is not None:
            self.server.close()  # before the storage it sends from goes
            self.server = None
        if self._remote is not None:
            self._remote.close()
        for where in self._storage.values():
            if isinstance(where, str):
                segments.unlink(where)
        self._storage.clear()
        self.clients.close()
        self.peers.close()
        self.table.close()


class Scope:
    """One invocation's inputs: pulled blocks are freed, and handles released, when it closes.

    Tensors pulled through a scope view arena memory that is reused after `close`: an executor
    publishes (copies) outputs before closing, and ModelFns do not keep inputs across calls.
    """

    def __init__(self, store: TensorStore, device: torch.device | None = None) -> None:
        self.store = store
        self.device = device  # where the ModelFn computes: pulled tensors are copied there
        self.blocks: list[Block] = []
        self.lazies: list[LazyFetch] = []

    def fetch(self, handle: TensorHandle, release: bool = True) -> torch.Tensor:
        out = self.store.pull(handle, self)
        if self.device is not None and out.device != self.device:
            out = out.to(self.device)  # a GPU executor over the shared-memory arena: host -> device
        if release:
            self.store.release(handle)
        return out

    def lazy(self, source: HandleSource, timeout: float | None = None, release: bool = True) -> LazyFetch:
        fetch = LazyFetch(self, source, timeout, release)
        self.lazies.append(fetch)
        return fetch

    def close(self) -> None:
        for fetch in self.lazies:
            fetch.abandon()
        self.lazies.clear()
        for block in self.blocks:
            self.store.arena.free(block)
        self.blocks.clear()

    def __enter__(self) -> Scope:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LazyFetch:
    """A callback input: the handle may not exist yet; the pull happens on the first call only."""

    def __init__(self, scope: Scope, source, timeout: float | None = None, release: bool = True) -> None:
        self._scope, self._source, self._timeout, self._release = scope, source, timeout, release
        self._value: torch.Tensor | None = None
        self._lock = threading.Lock()
        self.fetched_at: float | None = None

    @property
    def fetched(self) -> bool:
        return self._value is not None

    def _handle(self) -> TensorHandle:
        src = self._source
        if isinstance(src, TensorHandle):
            return src
        if isinstance(src, Future):
            return src.result(self._timeout)
        return src()

    def abandon(self) -> None:
        """The invocation ended without touching this input: give up its read (now or when it arrives)."""
        if self.fetched or not self._release:
            return
        src = self._source
        if isinstance(src, Future):
            src.add_done_callback(lambda f: f.exception() is None and self._drop(f.result()))
        elif isinstance(src, TensorHandle):
            self._drop(src)

    def _drop(self, handle: TensorHandle) -> None:
        try:
            self._scope.store.release(handle)
        except SegmentError:
            pass  # its producer is gone or the tensor was already reclaimed

    def __call__(self) -> torch.Tensor:
        with self._lock:
            if self._value is None:
                self._value = self._scope.fetch(self._handle(), self._release)
                self.fetched_at = time.perf_counter()
            return self._value


HandleSource = Union[TensorHandle, "Future[TensorHandle]", Callable[[], TensorHandle]]
