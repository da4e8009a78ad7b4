"""The data plane across hosts: a producer's arena served over one ZeroMQ socket, pulled one-sidedly.

Same host, same memory: a consumer maps the producer's segment and copies (cluster.dataplane.segments).
Another host has no such map, so every producer that may have readers elsewhere runs a `DataServer`: a
ROUTER socket on `tcp://IP:PORT` (its address travels in the tensor's metadata, `addr`) that answers

    get    the bytes of one published tensor, sent zero-copy from the arena (or spill segment)
    add    a change of its reference count (a reader's release, a caller's retain)
    check  whether the handle is still live (its generation)

on behalf of consumers' `RemotePeers`. The reference counts and generations are the same table as the
shared-memory path's: while a `get` is being sent the server holds one more reference, so the block
cannot be freed and reused under the socket (released when ZeroMQ says the frame is sent). A
consumer keeps the received frame as the tensor's storage: no copy on either side.

Where a pull goes is this process's `--data-plane` mode: `auto` (shared memory when the producer's
`host` is ours, TCP otherwise), `shm` (always shared memory) or `tcp` (TCP for every other producer,
also on one host: the cross-host path, testable on one machine). A host is `host_id()`: the host name
and boot id, or `COMFY_CLUSTER_HOST_ID` (simulated nodes on one machine name themselves).

Every request carries an HMAC of itself with the cluster secret (cluster.secret); a server with a
secret answers nothing else, and logs the refusal once per peer.
"""
from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
import time
from typing import Any

import msgspec
import numpy as np
import torch
import zmq

from cluster import secret as cluster_secret
from cluster.dataplane import segments
from cluster.dataplane.segments import SegmentError

log = logging.getLogger("cluster.dataplane")

MODES = ("auto", "shm", "tcp")
MODE_ENV = "COMFY_CLUSTER_DATA_PLANE"
HOST_ENV = "COMFY_CLUSTER_HOST_ID"
REQUEST_TIMEOUT_S = 30.0     # a producer that does not answer a pull by then is taken as lost
SMALL = 64 << 10             # replies below this are copied into a fresh tensor (aligned, and cheap)

_mode = os.environ.get(MODE_ENV, "auto")
_header = msgspec.msgpack.Encoder()
_decode_header = msgspec.msgpack.Decoder(list)


class RemoteRefused(SegmentError):
    """A data server refused the request (no cluster secret, or a wrong one)."""


def set_mode(mode: str) -> None:
    """This process's data-plane mode (`auto`, `shm` or `tcp`); children inherit it through the environment."""
    global _mode
    if mode not in MODES:
        raise ValueError(f"data plane {mode!r}: choose one of {', '.join(MODES)}")
    _mode = mode
    os.environ[MODE_ENV] = mode


def mode() -> str:
    return _mode


def host_id() -> str:
    """Which processes share this one's memory: `COMFY_CLUSTER_HOST_ID`, else host name and boot id."""
    named = os.environ.get(HOST_ENV)
    if named:
        return named
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()[:8]
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}"


def local_ip(toward: str) -> str:
    """The address of this machine on the route to `toward` (a host name or IP); no packet is sent."""
    if toward in ("", "*", "0.0.0.0"):
        toward = "192.0.2.1"   # TEST-NET-1: any routable address picks the default route's interface
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((toward, 9))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def over_tcp(meta: Any, me: str) -> bool:
    """Whether this process pulls the tensor `meta` describes over its owner's data socket."""
    if not getattr(meta, "addr", "") or meta.owner == me or _mode == "shm":
        return False
    return _mode == "tcp" or getattr(meta, "host", "") != host_id()


class DataServer:
    """Serves one `TensorStore`'s published tensors to other hosts, on a thread of its own."""

    def __init__(self, store: Any, ip: str = "127.0.0.1", secret: bytes | None = None, port: int = 0) -> None:
        self.store, self.secret = store, secret
        self._sock = zmq.Context.instance().socket(zmq.ROUTER)
        self._sock.setsockopt(zmq.LINGER, 0)
        if port:
            self._sock.bind(f"tcp://{ip}:{port}")
        else:
            port = self._sock.bind_to_random_port(f"tcp://{ip}")
        self.address = f"tcp://{ip}:{port}"
        self.served = 0
        self.refused = 0
        self._sending: list[tuple[zmq.MessageTracker, list]] = []   # frames in flight, their extra reference
        self._warned: set[bytes] = set()
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="data-server", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=2)

    def _loop(self) -> None:
        try:
            while not self._stop:
                if self._sock.poll(5 if self._sending else 100):
                    frames = self._sock.recv_multipart()
                    if len(frames) == 3:
                        self._answer(*frames)
                self._sent()
        finally:
            self._sock.close()
            for _, req in self._sending:
                self._unref(req)

    def _sent(self) -> None:
        """Give back the reference held by every frame ZeroMQ has finished sending."""
        still = []
        for tracker, req in self._sending:
            if tracker.done:
                self._unref(req)
            else:
                still.append((tracker, req))
        self._sending = still

    def _unref(self, req: list) -> None:
        if req[5]:
            try:
                self.store.clients.add(req[5], req[6], req[7], -1)
            except SegmentError:
                pass

    def _answer(self, peer: bytes, header: bytes, mac: bytes) -> None:
        if self.secret is not None and not cluster_secret.verify(self.secret, mac, header):
            self.refused += 1
            if peer not in self._warned and len(self._warned) < 1000:
                self._warned.add(peer)
                log.warning("data server %s refused a peer: its cluster secret %s", self.address,
                            "is missing" if not mac else "does not match")
            self._sock.send_multipart([peer, header[:16], b"refused", b"the cluster secret does not match"])
            return
        try:
            req = _decode_header.decode(header)
            rid, op, seg, offset, nbytes, refs, slot, gen, delta = req
        except (msgspec.DecodeError, ValueError, TypeError):
            return
        reply_id = rid.to_bytes(8, "big")
        try:
            if refs and refs != self.store.table.name:
                raise SegmentError(f"{refs} is not this producer's reference table")
            if op == "get":
                data = self._bytes(seg, offset, nbytes)
                if refs:
                    self.store.clients.add(refs, slot, gen, 1)   # held until the frame is sent
                tracker = self._sock.send_multipart([peer, reply_id, b"ok", data], copy=False, track=True)
                self._sending.append((tracker, req))
                self.served += 1
                return
            if op == "add":
                result = self.store.clients.add(refs, slot, gen, delta) if refs else -1
            elif op == "check":
                if refs:
                    self.store.clients.check(refs, slot, gen)
                result = 0
            else:
                raise SegmentError(f"unknown data-plane request {op!r}")
            self._sock.send_multipart([peer, reply_id, b"ok", str(result).encode()])
        except SegmentError as e:
            self._sock.send_multipart([peer, reply_id, b"error", f"{type(e).__name__}: {e}".encode()])

    def _bytes(self, seg: str, offset: int, nbytes: int) -> Any:
        """A view (no copy) of bytes this producer published: its arena's, or one of its spill segments'."""
        arena = self.store.arena
        if seg == arena.name:
            if arena.pe >= 0:
                raise SegmentError("a GPU arena is not served over TCP")
            return arena.view(offset, torch.uint8, (nbytes,)).numpy()
        if not seg.startswith(self.store.prefix):
            raise SegmentError(f"segment {seg} is not this producer's")
        mm = self.store.peers.get(seg)
        if offset < 0 or offset + nbytes > len(mm):
            raise SegmentError(f"[{offset}, +{nbytes}) does not fit segment {seg}")
        return np.frombuffer(mm, dtype=np.uint8, count=nbytes, offset=offset)


class RemotePeers:
    """A consumer's connections to producers' data servers (one DEALER per producer, any thread)."""

    def __init__(self, secret: bytes | None = None, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.secret, self.timeout_s = secret, timeout_s
        self._socks: dict[str, tuple[zmq.Socket, threading.Lock]] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def _socket(self, addr: str) -> tuple[zmq.Socket, threading.Lock]:
        with self._lock:
            hit = self._socks.get(addr)
            if hit is None:
                if not addr.startswith("tcp://"):
                    raise SegmentError(f"bad data address {addr!r}")
                sock = zmq.Context.instance().socket(zmq.DEALER)
                sock.setsockopt(zmq.LINGER, 0)
                sock.setsockopt(zmq.IMMEDIATE, 1)           # no queueing for a producer that is not there
                sock.setsockopt(zmq.SNDTIMEO, int(self.timeout_s * 1000))
                sock.connect(addr)
                hit = self._socks[addr] = (sock, threading.Lock())
            return hit

    def _drop(self, addr: str) -> None:
        with self._lock:
            hit = self._socks.pop(addr, None)
        if hit is not None:
            hit[0].close(linger=0)

    def _request(self, meta: Any, op: str, delta: int = 0) -> list[zmq.Frame]:
        rid = next(self._ids)
        header = _header.encode([rid, op, meta.segment, meta.offset, meta.nbytes, meta.refs, meta.slot,
                                 meta.generation, delta])
        mac = cluster_secret.proof(self.secret, header) if self.secret is not None else b""
        sock, lock = self._socket(meta.addr)
        with lock:
            try:
                sock.send_multipart([header, mac])
            except zmq.Again:
                self._drop(meta.addr)
                raise SegmentError(f"the producer {meta.owner} at {meta.addr} is unreachable") from None
            end = time.monotonic() + self.timeout_s
            while True:
                left = end - time.monotonic()
                if left <= 0 or not sock.poll(left * 1000):
                    self._drop(meta.addr)   # a late answer must not be read as the next request's
                    raise SegmentError(f"the producer {meta.owner} at {meta.addr} did not answer in "
                                       f"{self.timeout_s:g}s (lost?)")
                frames = sock.recv_multipart(copy=False)
                if len(frames) == 3 and frames[1].bytes == b"refused":
                    raise RemoteRefused(f"the producer {meta.owner} at {meta.addr} refused this process: "
                                        f"{frames[2].bytes.decode(errors='replace')}")
                if len(frames) == 3 and int.from_bytes(frames[0].bytes, "big") == rid:
                    break
        if frames[1].bytes != b"ok":
            text = frames[2].bytes.decode(errors="replace")
            if text.startswith("StaleHandle"):
                from cluster.dataplane.refcounts import StaleHandle
                raise StaleHandle(f"{meta.owner} at {meta.addr}: {text}")
            raise SegmentError(f"{meta.owner} at {meta.addr}: {text}")
        return frames

    def pull(self, meta: Any, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
        """The tensor `meta` names, received into a frame that becomes its storage (no copy)."""
        frame = self._request(meta, "get")[2]
        if len(frame) != meta.nbytes:
            raise SegmentError(f"{meta.owner} at {meta.addr} sent {len(frame)} bytes, not {meta.nbytes}")
        if meta.nbytes < SMALL:
            flat = torch.tensor(bytearray(frame.bytes), dtype=torch.uint8) if meta.nbytes else \
                torch.empty(0, dtype=torch.uint8)
        else:
            flat = torch.frombuffer(frame.buffer, dtype=torch.uint8)
        return flat.view(dtype).view(shape)

    def add(self, meta: Any, delta: int) -> int:
        return int(self._request(meta, "add", delta)[2].bytes)

    def check(self, meta: Any) -> None:
        self._request(meta, "check")

    def close(self) -> None:
        for addr in list(self._socks):
            self._drop(addr)
