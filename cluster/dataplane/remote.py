"""The data plane across hosts: a producer's arena served over TCP, pulled one-sidedly.

Same host, same memory: a consumer maps the producer's segment and copies (cluster.dataplane.segments).
Another host has no such map, so every producer that may have readers elsewhere runs a `DataServer`
on `tcp://IP:PORT` (its address travels in the tensor's metadata, `addr`) that answers

    get    the bytes of one published tensor, sent from the arena (or spill segment) as they lie there
    add    a change of its reference count (a reader's release, a caller's retain)
    check  whether the handle is still live (its generation)
    size / file   the size, and a range of the bytes, of a model file this process digested (the head's
           files, for an executor on another machine that has no copy: `RemotePeers.fetch_file`), only to
           requests proven with the cluster secret

on behalf of consumers' `RemotePeers`. The reference counts and generations are the same table as the
shared-memory path's: while a `get` is being sent the server holds one more reference, so the block
cannot be freed and reused under the socket. Bytes are never copied in user space: the server sends
from its arena's memory, the consumer receives straight into the block of its own arena that a
shared-memory pull would have copied into. Plain sockets rather than ZeroMQ frames: a ZeroMQ
message is received into memory freshly allocated per message, whose page faults cost more than the
transfer itself on loopback, while an arena block is already mapped (`comfy-cluster bench dataplane`).

Where a pull goes is this process's `--data-plane` mode: `auto` (shared memory when the producer's
`host` is ours, TCP otherwise), `shm` (always shared memory) or `tcp` (TCP for every other producer,
also on one host: the cross-host path, testable on one machine). A host is `host_id()`: the host name
and boot id, or `COMFY_CLUSTER_HOST_ID` (simulated nodes on one machine name themselves).

Every request carries an HMAC of itself with the cluster secret (cluster.secret); a server with a
secret answers nothing else, and logs the refusal once per peer address.

Wire format, both ways length-prefixed: a request is `u32 header length, u8 mac length, header (msgpack
[id, op, segment, offset, nbytes, refs, slot, generation, delta]), mac`; a reply is `u8 status (0 ok, 1
error, 2 refused), u64 length, body` (the tensor's bytes, a count, or an error text).
"""

from __future__ import annotations

import itertools
import logging
import mmap
import os
import socket
import socketserver
import struct
import threading
from typing import Any

import msgspec
import torch

from cluster import secret as cluster_secret
from cluster.dataplane.refcounts import StaleHandle
from cluster.dataplane.segments import SegmentError
from cluster.refs import digested_file, file_digest

log = logging.getLogger("cluster.dataplane")

MODES = ("auto", "shm", "tcp")
MODE_ENV = "COMFY_CLUSTER_DATA_PLANE"
HOST_ENV = "COMFY_CLUSTER_HOST_ID"
REQUEST_TIMEOUT_S = 30.0  # a producer that does not answer a pull by then is taken as lost
CONNECT_TIMEOUT_S = 5.0
MAX_HEADER = 4096
OK, ERROR, REFUSED = 0, 1, 2
_REQUEST = struct.Struct("!IB")
_REPLY = struct.Struct("!BQ")

_mode = os.environ.get(MODE_ENV, "auto")
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(list).decode


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
        toward = "192.0.2.1"  # TEST-NET-1: any routable address picks the default route's interface
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


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    _recv_into(sock, memoryview(buf))
    return bytes(buf)


def _recv_into(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if not n:
            raise ConnectionError("connection closed")
        got += n


def _bytes_of(t: torch.Tensor) -> memoryview:
    """The bytes of a contiguous CPU tensor, writable, without a copy."""
    return memoryview(t.reshape(-1).view(torch.uint8).numpy())


class DataServer:
    """Serves one `TensorStore`'s published tensors to other hosts (a thread per connected consumer)."""

    def __init__(self, store: Any, ip: str = "127.0.0.1", secret: bytes | None = None, port: int = 0) -> None:
        self.store, self.secret = store, secret
        self.served = 0
        self.refused = 0
        self._warned: set[str] = set()
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                try:
                    while server.answer(self.request, self.client_address[0]):
                        pass
                except (ConnectionError, OSError):
                    pass  # the consumer went away

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server((ip, port), Handler)
        self.address = f"tcp://{ip}:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, name="data-server", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, sock: socket.socket, peer: str) -> bool:
        """Read one request from `sock` and answer it; False when the consumer closed the connection."""
        try:
            size, mac_size = _REQUEST.unpack(_recv_exact(sock, _REQUEST.size))
        except ConnectionError:
            return False
        if size > MAX_HEADER:
            return False
        header, mac = _recv_exact(sock, size), _recv_exact(sock, mac_size)
        if self.secret is not None and not cluster_secret.verify(self.secret, mac, header):
            self.refused += 1
            if peer not in self._warned and len(self._warned) < 1000:
                self._warned.add(peer)
                log.warning(
                    "data server %s refused %s: its cluster secret %s",
                    self.address,
                    peer,
                    "is missing" if not mac else "does not match",
                )
            self._reply(sock, REFUSED, b"the cluster secret does not match")
            return True
        try:
            _, op, seg, offset, nbytes, refs, slot, gen, delta = _decode(header)
        except (msgspec.DecodeError, ValueError, TypeError):
            return False
        try:
            if refs and refs != self.store.table.name:
                raise SegmentError(f"{refs} is not this producer's reference table")
            if op == "get":
                self._send_tensor(sock, seg, offset, nbytes, refs, slot, gen)
                return True
            if op == "file":
                self._send_file(sock, self._model_file(seg), offset, nbytes)
                return True
            if op == "size":
                self._reply(sock, OK, str(os.path.getsize(self._model_file(seg))).encode())
                return True
            if op == "add":
                result = self.store.clients.add(refs, slot, gen, delta) if refs else -1
            elif op == "check":
                if refs:
                    self.store.clients.check(refs, slot, gen)
                result = 0
            else:
                raise SegmentError(f"unknown data-plane request {op!r}")
            self._reply(sock, OK, str(result).encode())
        except SegmentError as e:
            self._reply(sock, ERROR, f"{type(e).__name__}: {e}".encode())
        return True

    def _reply(self, sock: socket.socket, status: int, body: bytes) -> None:
        sock.sendall(_REPLY.pack(status, len(body)) + body)

    def _send_tensor(
        self, sock: socket.socket, seg: str, offset: int, nbytes: int, refs: str, slot: int, gen: int
    ) -> None:
        if refs:
            self.store.clients.add(refs, slot, gen, 1)  # held while the bytes are sent: not freed under us
        try:
            data = self._bytes(seg, offset, nbytes)
            sock.sendall(_REPLY.pack(OK, nbytes))
            sock.sendall(data)
            self.served += 1
        finally:
            if refs:
                try:
                    self.store.clients.add(refs, slot, gen, -1)
                except SegmentError:
                    pass

    def _model_file(self, digest: str) -> str:
        if self.secret is None:
            raise SegmentError("model files are served only where the cluster has a secret")
        path = digested_file(digest)
        if path is None:
            raise SegmentError(f"no model file with BLAKE3 {digest[:16]}... here")
        return path

    def _send_file(self, sock: socket.socket, path: str, offset: int, nbytes: int) -> None:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if offset < 0 or nbytes < 0 or offset + nbytes > size:
                raise SegmentError(f"[{offset}, +{nbytes}) does not fit a file of {size} bytes")
            sock.sendall(_REPLY.pack(OK, nbytes))
            sock.sendfile(f, offset, nbytes)  # from the page cache to the socket, no copy here

    def _bytes(self, seg: str, offset: int, nbytes: int) -> memoryview:
        """A view (no copy) of bytes this producer published: its arena's, or one of its spill segments'."""
        arena = self.store.arena
        if seg == arena.name:
            view = arena.view(offset, torch.uint8, (nbytes,))
            # an NVSHMEM arena's bytes are on the GPU: staged through host memory for a consumer that is no PE
            return _bytes_of(view.cpu() if arena.pe >= 0 else view)
        if not seg.startswith(self.store.prefix):
            raise SegmentError(f"segment {seg} is not this producer's")
        mm = self.store.peers.get(seg)
        if offset < 0 or offset + nbytes > len(mm):
            raise SegmentError(f"[{offset}, +{nbytes}) does not fit segment {seg}")
        return memoryview(mm)[offset : offset + nbytes]


class RemotePeers:
    """A consumer's connections to producers' data servers (one per producer, used by one thread at a time)."""

    def __init__(self, secret: bytes | None = None, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.secret, self.timeout_s = secret, timeout_s
        self._conns: dict[str, tuple[socket.socket, threading.Lock]] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def _conn(self, addr: str) -> tuple[socket.socket, threading.Lock]:
        with self._lock:
            hit = self._conns.get(addr)
        if hit is not None:
            return hit
        if not addr.startswith("tcp://"):
            raise SegmentError(f"bad data address {addr!r}")
        host, port = addr[len("tcp://") :].rsplit(":", 1)
        # a host that is down answers nothing: give up on connecting sooner than on a long transfer
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=min(CONNECT_TIMEOUT_S, self.timeout_s))
        sock.settimeout(self.timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            hit = self._conns.setdefault(addr, (sock, threading.Lock()))
        if hit[0] is not sock:
            sock.close()
        return hit

    def _drop(self, addr: str) -> None:
        with self._lock:
            hit = self._conns.pop(addr, None)
        if hit is not None:
            hit[0].close()

    def _request(self, meta: Any, op: str, delta: int = 0, into: torch.Tensor | None = None) -> bytes:
        """Send one request and read its reply; a `get` reply's bytes land in `into`."""
        fields = [meta.segment, meta.offset, meta.nbytes, meta.refs, meta.slot, meta.generation, delta]
        return self._call(meta.addr, meta.owner, op, fields, None if into is None else _bytes_of(into))

    def _call(self, addr: str, owner: str, op: str, fields: list, into: memoryview | None = None) -> bytes:
        header = _encode([next(self._ids), op, *fields])
        mac = cluster_secret.proof(self.secret, header) if self.secret is not None else b""
        try:
            sock, lock = self._conn(addr)
            with lock:
                sock.sendall(_REQUEST.pack(len(header), len(mac)) + header + mac)
                status, size = _REPLY.unpack(_recv_exact(sock, _REPLY.size))
                if status == OK and into is not None:
                    if size != len(into):
                        raise ConnectionError(f"sent {size} bytes, not {len(into)}")
                    _recv_into(sock, into)
                    return b""
                body = _recv_exact(sock, size)
        except (OSError, ConnectionError) as e:  # timeouts too: a late answer must not be read as the next
            self._drop(addr)
            raise SegmentError(f"the producer {owner} at {addr} is unreachable or lost: {e}") from None
        if status == REFUSED:
            raise RemoteRefused(f"the producer {owner} at {addr} refused this process: {body.decode()}")
        if status != OK:
            text = body.decode(errors="replace")
            raise (StaleHandle if text.startswith("StaleHandle") else SegmentError)(f"{owner} at {addr}: {text}")
        return body

    def fetch_file(self, addr: str, digest: str, dest: str, chunk: int = 64 << 20) -> None:
        """Copy the model file with BLAKE3 `digest` that the process at `addr` serves into `dest` (written
        beside it, renamed into place, checked against the digest there: the check's digest is memoised for
        `dest`, so its loader does not hash it again; removed if it differs)."""
        size = int(self._call(addr, "the head", "size", [digest, 0, 0, "", 0, 0, 0]))
        tmp = f"{dest}.{os.getpid()}.part"
        try:
            with open(tmp, "wb") as f:
                f.truncate(size)
            if size:
                with open(tmp, "r+b") as f, mmap.mmap(f.fileno(), size) as mm:
                    with memoryview(mm) as view:  # received straight into the file's pages
                        for offset in range(0, size, chunk):
                            n = min(chunk, size - offset)
                            with view[offset : offset + n] as part:
                                self._call(addr, "the head", "file", [digest, offset, n, "", 0, 0, 0], part)
            os.replace(tmp, dest)
            got = file_digest(dest)
            if got != digest:
                os.unlink(dest)
                raise SegmentError(f"the file fetched from {addr} has BLAKE3 {got[:16]}..., not {digest[:16]}...")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def pull(self, meta: Any, out: torch.Tensor) -> None:
        """Receive the tensor `meta` names into `out` (contiguous, CPU, `meta.nbytes` bytes)."""
        self._request(meta, "get", into=out)

    def add(self, meta: Any, delta: int) -> int:
        return int(self._request(meta, "add", delta))

    def check(self, meta: Any) -> None:
        self._request(meta, "check")

    def close(self) -> None:
        for addr in list(self._conns):
            self._drop(addr)
