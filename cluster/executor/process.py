"""The executor process: runs invocations the head dispatches to it, one at a time.

    python -m cluster.executor --head ipc:///tmp/head.sock --device cpu --threads 2 \
        --memory-budget 4000000000 [--preload tests.cluster.cluster_fns]

(`comfy-cluster executor --head tcp://HOST:PORT` is the same process, joining a head on another
machine: it proves it knows the cluster secret in its hello, and serves its outputs to consumers on
other hosts over its data socket, cluster.dataplane.remote.)

The main thread receives dispatches, runs the ModelFns and sends the results on its ZeroMQ DEALER
socket itself: no thread handoff on the way in or out, which is most of a short call's latency. A
lock guards the socket; the main thread holds it except while a ModelFn runs, and only then does a
watchdog thread take it to send heartbeats and to answer the head (an abort of a hung invocation, a
shutdown), so a long invocation is not mistaken for a lost executor. The executor's data plane
(cluster.dataplane.plane) holds one memory budget shared by its arena, active inference and cached
weights: inputs are pulled one-sidedly from their producers' arenas, outputs are published into its
own arena and only their metadata travels in the reply; weights live in the per-layer cache (LRU
model first, last layers first). The run itself is the executor core's (cluster.executor.core), the
same one the in-process runtime drives; this module is the process shell around it (`ArenaIO` moves
the tensors). A `BatchDispatch` (compatible invocations of several requests) is run as one call: each
part's inputs pulled, merged along the batch, the ModelFn run once, the outputs split and published
per part, one Done per part charged its share of the measured time; if the merged run fails, the
parts are run one by one, so one part's bad input fails only that part. Between runs a preloader
thread fills idle memory with the first L_e layers of the models the head's latest `Preload` names
(cluster.executor.preloader); a run pauses it. An invocation the head
aborts (past its deadline) cannot be interrupted inside a Python thread, so the executor says goodbye and exits; whoever
supervises it starts a fresh one.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import faulthandler
import gc
import importlib
import logging
import os
import shutil
import signal
import socket
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import torch
import zmq

from cluster import messages as m
from cluster import refs
from cluster import secret as cluster_secret
from cluster.call import unpack
from cluster.dataplane import nvshmem_team, remote, segments
from cluster.dataplane.handle import TensorHandle
from cluster.dataplane.model_files import ModelFileFetcher
from cluster.dataplane.plane import CallInputs, ExecutorDataPlane
from cluster.dataplane.segments import safe_prefix
from cluster.executor.core import (
    ExecutorCore,
    Fault,
    Part,
    Ran,
    TensorIO,
    cap_device_memory,
    default_host_bytes,
    default_memory_budget,
)
from cluster.executor.options import stop_starting
from cluster.executor.preloader import Preloader
from cluster.executor.providers import add_providers
from cluster.modelfn import ModelFn, warm_up_all

log = logging.getLogger("cluster.executor")
# where the host tier spills whole models past its capacity (one folder per executor, removed on exit)
WEIGHTS_DIR = Path.home() / ".cache" / "comfy-cluster" / "weights"


class Executor:
    def __init__(
        self,
        head: str,
        device: str = "cpu",
        threads: int = 1,
        memory_budget: int | None = None,
        executor_id: str | None = None,
        heartbeat_s: float = 0.5,
        exit_with_parent: bool = False,
        arena_bytes: int = 64 << 20,
        host_bytes: int | None = None,
        device_share: int = 1,
        host_share: int = 1,
        parent_pid: int | None = None,
        warmed: tuple[list[str], float] = ([], 0.0),
        secret: bytes | None = None,
        data_ip: str | None = None,
        h2d_bandwidth: float | None = None,
        nvshmem: bool | None = None,
    ) -> None:
        self.head = head
        self.warmed, self.warm_s = warmed  # what warm_up_all did before this executor registers
        self.secret = secret
        if device == "cuda":  # a bare "cuda" is the current GPU: name its index, as set_device needs
            device = f"cuda:{torch.cuda.current_device()}"
        self.device = device
        if device.startswith("cuda"):
            torch.cuda.set_device(torch.device(device))  # tensors a ModelFn makes on "cuda" land on this GPU
        self.threads = threads
        self.id = executor_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.prefix = safe_prefix(self.id)
        self.heartbeat_s = heartbeat_s
        if memory_budget is None:
            memory_budget = default_memory_budget(device, device_share)
        self.memory_budget = memory_budget
        cap_device_memory(device, memory_budget, device_share)
        self.plane = ExecutorDataPlane(
            self.id,
            memory_budget,
            min(arena_bytes, memory_budget),
            device,
            weights_dir=WEIGHTS_DIR / self.prefix.strip("-"),
            host_bytes=default_host_bytes(device, memory_budget, host_share) if host_bytes is None else host_bytes,
            h2d_bandwidth=h2d_bandwidth,
        )
        self.core = ExecutorCore(self.plane.budget, self.plane.cache, device, threads)
        self.preloader = Preloader(self.core.models, self.core.fn)  # the head's messages.Preload
        self.io = ArenaIO(self.plane)
        self.ip = remote.local_ip(_host_of(head)) if head.startswith("tcp://") else ""
        self.plane.store.secret = secret
        # a GPU executor with nvshmem4py joins its host's NVSHMEM team when the head hands it a ticket (a data
        # plane forced to shared memory or TCP keeps its host arena); consumers that are no PE of the team
        # (the caller, for one) read its arena over its data socket, which it then always serves
        self.nvshmem = (
            device.startswith("cuda") and remote.mode() == "auto" and nvshmem_team.available()
            if nvshmem is None
            else nvshmem
        )
        if data_ip is None and (head.startswith("tcp://") or remote.mode() == "tcp" or self.nvshmem):
            data_ip = self.ip or "127.0.0.1"  # where the head (and so its other executors) reach us
        if data_ip is not None:
            self.plane.store.serve(data_ip, secret)
        self.refused: str | None = None  # why the head refused this executor
        self._nonce = b""
        self._old_nonces: collections.deque[bytes] = collections.deque(maxlen=64)  # hellos not answered yet
        # whose exit ends this executor; a launcher names itself, since it may be gone before we ask
        self.parent = parent_pid or (os.getppid() if exit_with_parent else None)
        self._pending: collections.deque[m.Dispatch | m.BatchDispatch] = collections.deque()
        self._aborted: set[int] = set()
        self._running: tuple[int, ...] = ()  # dispatch ids of the run in progress
        self._join_deadline = 0.0  # when a team step in progress has taken too long
        self._io = threading.Lock()  # the socket's; see the module docstring
        self._next_beat = 0.0
        self._stop = False
        # an executor that joined from another machine outlives a head restart (`comfy-cluster executor`);
        # one its head started stops with it
        self.rejoin = False
        self._head_gone = False

    # the worker thread: the core runs, this shell translates --------------------------------------
    def _part(self, d: m.Dispatch) -> Part:
        ref, params = unpack(d.call, self.core.fn(d.fn).Params)  # the one decode of the call
        return Part(ref, params, d.inputs, d.nulls)

    def _reply(self, d: m.Dispatch, r: Ran | Fault) -> m.Done | m.Failed:
        if isinstance(r, Fault):
            return m.Failed(
                d.dispatch_id,
                f"{type(r.error).__name__}: {r.error}",
                r.traceback,
                r.measured_s,
                lost_input=r.lost_input,
            )
        return m.Done(
            d.dispatch_id,
            r.outputs,
            r.nulls,
            r.measured_s,
            r.wall_s,
            r.load_s,
            self.plane.memory_used(),
            self.core.models.resident(),
            r.batch,
            r.batch_s,
        )

    def _run_parts(self, dispatches: list[m.Dispatch]) -> list[m.Done | m.Failed]:
        """The dispatches (of one ModelFn) as one core run; a payload that does not decode fails alone."""
        replies: dict[int, m.Done | m.Failed] = {}
        parts: list[tuple[m.Dispatch, Part]] = []
        for d in dispatches:
            try:
                parts.append((d, self._part(d)))
            except Exception as e:  # reported to the caller, which raises it
                replies[d.dispatch_id] = m.Failed(
                    d.dispatch_id, f"{type(e).__name__}: {e}", traceback.format_exc(), 0.0
                )
        if parts:
            stats = self.plane.store.stats
            before = (stats.shm_pulls, stats.tcp_pulls, stats.tcp_bytes, stats.tcp_s)
            streamed = self.plane.cache.streamed
            with self.preloader.paused():
                results = self.core.run(parts[0][0].fn, [p for _, p in parts], self.io)
            replies.update({d.dispatch_id: self._reply(d, r) for (d, _), r in zip(parts, results)})
            first = replies[parts[0][0].dispatch_id]
            if isinstance(first, m.Done):  # the run's pulls, on its first part
                first.shm_pulls, first.tcp_pulls = stats.shm_pulls - before[0], stats.tcp_pulls - before[1]
                first.tcp_bytes, first.tcp_s = stats.tcp_bytes - before[2], stats.tcp_s - before[3]
                first.measured_s += first.tcp_s  # waiting for the network is time the tenant's run took
                first.layers_loaded = self.plane.cache.streamed - streamed
                if self.device.startswith("cuda"):  # the GPU check's proof that the run used the GPU
                    first.device_peak = torch.cuda.max_memory_allocated(self.device)
        return [replies[d.dispatch_id] for d in dispatches]

    def stop(self) -> None:
        """Leave after the invocation in progress, as on the head's Shutdown (data plane closed, segments
        unlinked, goodbye said)."""
        self._stop = True

    def _join_team(self, t: m.Team) -> m.TeamJoined:
        """Leave the current NVSHMEM team (or host arena) and join `t` (collective: returns once every
        member has joined); on failure, serve from host shared memory again and say why. A team of size 0
        is a dissolved one (a member is gone): leave it without its collectives, for host memory."""
        with self.preloader.paused():
            if t.nranks == 0:
                self.plane.reform(None, intact=False)
                log.warning(
                    "the NVSHMEM team was dissolved (generation %d): serving from shared memory%s",
                    t.generation,
                    "" if self.plane.can_join() else " until this process is restarted",
                )
                return m.TeamJoined(t.generation)
            try:
                self.plane.reform(nvshmem_team.Ticket(t.uid, t.rank, t.nranks, t.generation))
                log.info("joined the NVSHMEM team as PE %d of %d (generation %d)", t.rank, t.nranks, t.generation)
                return m.TeamJoined(t.generation)
            except Exception as e:
                log.exception("could not join the NVSHMEM team (generation %d)", t.generation)
                try:
                    self.plane.reform(None)
                except Exception:  # the arena could not even be rebuilt: the head will see this executor fail
                    log.exception("could not go back to a host arena")
                return m.TeamJoined(t.generation, f"{type(e).__name__}: {e}")

    def _forget_head(self) -> None:
        """The head stopped: drop what it sent and every tensor published for it (a new head knows none of
        them), keep the models; its successor answers the next heartbeat with Reset, and we join it. Our
        NVSHMEM team's id is spent (its listener was the old head's) and its other members may have
        stopped with the head: it is left without its collectives (cleanly only if it is a team of one,
        which can then join the new head's team)."""
        self._head_gone = False
        self._pending.clear()
        self._aborted.clear()
        self.plane.reform(None, intact=False)

    # the main thread ------------------------------------------------------------------------------
    def _orphaned(self) -> bool:
        return self.parent is not None and os.getppid() != self.parent

    def _send(self, sock: zmq.Socket, msg: msgspec.Struct, retry: bool = True) -> bool:
        """Send to the head. With no head connected (it died, or has not come up yet) a DEALER's send
        would block for ever: SNDTIMEO bounds each try, and an executor whose parent head has gone stops
        instead of waiting (a remote executor keeps trying until its head is back)."""
        data = m.encode(msg)
        while True:
            try:
                sock.send(data)
                return True
            except zmq.Again:
                if self._orphaned():
                    log.warning("parent process exited; stopping")
                    self._stop = True
                    return False
                if not retry or self._stop:  # stop() (SIGTERM) while the head is away ends the wait
                    return False

    def _join(self, sock: zmq.Socket) -> None:
        """Knowing a cluster secret: say hello and register once the head has proven it knows it too.
        Without one: register at once (a head with a secret refuses it)."""
        if self.secret is None:
            self._register(sock, b"")
            return
        if self._nonce:
            self._old_nonces.append(self._nonce)
        self._nonce = os.urandom(16)
        self._send(sock, m.Hello(self._nonce))

    def _register(self, sock: zmq.Socket, proof: bytes) -> None:
        self._send(
            sock,
            m.Register(
                self.id,
                socket.gethostname(),
                os.getpid(),
                self.device,
                self.threads,
                self.memory_budget,
                self.plane.memory_used(),
                self.core.models.resident(),
                self.prefix,
                self.warmed,
                self.warm_s,
                host_id=self.plane.store.host,
                ip=self.ip,
                data_address=self.plane.store.addr,
                proof=proof,
                nvshmem=self.nvshmem and self.plane.can_join(),
            ),
        )

    def _answer(self, sock: zmq.Socket, msg: m.Challenge) -> None:
        if self.secret is None or not self._nonce:
            return  # not asked for
        if any(cluster_secret.verify(self.secret, msg.proof, b"head", old, msg.nonce) for old in self._old_nonces):
            return  # the answer to an earlier hello (a head coming back answers every Reset's): the last one counts
        proof = cluster_secret.proof(self.secret, b"executor", msg.nonce, self._nonce, self.id.encode())
        if not cluster_secret.verify(self.secret, msg.proof, b"head", self._nonce, msg.nonce):
            if msg.proof:  # a head with another secret: our (useless to it) proof makes it log the refusal too
                self._register(sock, proof)
            self._refuse(
                f"the head at {self.head} could not prove it knows the cluster secret "
                f"({'it has none' if not msg.proof else 'a different one'}); not joining it"
            )
            return
        self._register(sock, proof)
        self._nonce = b""
        self._old_nonces.clear()

    def _refuse(self, why: str) -> None:
        log.error("%s", why)
        self.refused = why
        self._stop = True

    def _handle(self, sock: zmq.Socket, msg: m.ToExecutor) -> None:
        if isinstance(msg, (m.Dispatch, m.BatchDispatch)):
            self._pending.append(msg)
        elif isinstance(msg, m.Team):  # joined between runs, in order; a newer ticket replaces a queued one
            self._pending = collections.deque(p for p in self._pending if not isinstance(p, m.Team))
            self._pending.append(msg)
        elif isinstance(msg, m.Preload):
            self.preloader.want(msg.models)
        elif isinstance(msg, m.Welcome):
            self.heartbeat_s = msg.heartbeat_s
            if msg.files and self.secret is not None:  # files this machine lacks come from the head
                refs.fetch_missing_with(ModelFileFetcher(msg.files, self.secret))
        elif isinstance(msg, m.Challenge):
            self._answer(sock, msg)
        elif isinstance(msg, m.Refused):
            self._refuse(
                f"the head at {self.head} refused this executor: {msg.reason}. Set COMFY_CLUSTER_SECRET, "
                "or pass --workspace with a copy of the head's cluster.secret"
            )
        elif isinstance(msg, m.Reset):
            self._join(sock)
        elif isinstance(msg, m.Abort):
            if msg.dispatch_id in self._running:
                # A Python thread cannot be interrupted; a fresh process is the clean way out.
                log.error("aborting hung dispatch %d (%s); exiting", msg.dispatch_id, msg.reason)
                self._send(sock, m.Bye(f"aborted dispatch {msg.dispatch_id}: {msg.reason}"), retry=False)
                sock.close(linger=200)
                zmq.Context.instance().term()  # flushes the goodbye (os._exit would drop it)
                os._exit(3)
            self._aborted.add(msg.dispatch_id)
        elif isinstance(msg, m.Shutdown):
            if msg.head_stopping and self.rejoin:
                log.info("the head is stopping: waiting for it to come back, to join it again")
                self._head_gone = True  # what it sent us is dropped once no run is in progress
            else:
                self._stop = True

    def _drain(self, sock: zmq.Socket) -> None:
        """Handle every message waiting on the socket (the caller holds `_io`)."""
        while True:
            try:
                raw = sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                self._handle(sock, m.executor_decoder.decode(raw))
            except Exception as e:  # a bad frame from the head must not kill the executor
                log.warning("dropped a bad message from the head: %s", e)

    def _beat(self, sock: zmq.Socket) -> None:
        """Send a heartbeat if one is due (the caller holds `_io`)."""
        if time.monotonic() < self._next_beat:
            return
        busy = len(self._pending) + bool(self._running)
        self._send(
            sock, m.Heartbeat(busy, self.plane.memory_used(), self.core.models.resident(), self.preloader.report())
        )
        self._next_beat = time.monotonic() + self.heartbeat_s
        if self._orphaned():
            log.warning("parent process exited; stopping")
            self._stop = True

    def _watch(self, sock: zmq.Socket) -> None:
        """While a ModelFn runs: heartbeats, and the head's messages (an abort exits from here)."""
        while not self._stop:
            time.sleep(min(self.heartbeat_s, 0.1))
            if not self._running or not self._io.acquire(blocking=False):
                continue  # the main thread is at the socket: it does this itself
            try:
                if self._running:
                    self._drain(sock)
                    self._beat(sock)
                    if self._orphaned():
                        # orphaned while a ModelFn runs (maybe hung): nobody to finish it for
                        segments.unlink_prefix(self.prefix)
                        shutil.rmtree(WEIGHTS_DIR / self.prefix.strip("-"), ignore_errors=True)
                        os._exit(4)
                    if self._running == (JOINING_TEAM,) and time.monotonic() > self._join_deadline:
                        # a collective NVSHMEM call waits for a member that is gone and cannot be interrupted:
                        # a fresh process is the way out (the head counts it as a failed join on this GPU)
                        log.error("the NVSHMEM team step has not returned in %.0f s; exiting", TEAM_STEP_S)
                        segments.unlink_prefix(self.prefix)
                        shutil.rmtree(WEIGHTS_DIR / self.prefix.strip("-"), ignore_errors=True)
                        os._exit(5)
            finally:
                self._io.release()

    def run(self) -> None:
        if self._stop:  # stopped (SIGTERM) before it joined: nobody to say goodbye to
            self._close()
            return
        torch.set_num_threads(self.threads)
        ctx = zmq.Context.instance()
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.IDENTITY, self.id.encode())
        sock.setsockopt(zmq.LINGER, 500)
        sock.setsockopt(zmq.SNDTIMEO, SEND_TIMEOUT_MS)
        sock.connect(self.head)
        self._join(sock)
        self._next_beat = time.monotonic() + self.heartbeat_s
        watchdog = threading.Thread(target=self._watch, args=(sock,), name="executor-watchdog", daemon=True)
        watchdog.start()
        while not self._stop:
            with self._io:
                if not self._pending:
                    sock.poll(max(0.0, self._next_beat - time.monotonic()) * 1000)
                self._drain(sock)
                if self._head_gone:
                    self._forget_head()
                self._beat(sock)
                if not self._pending or self._stop:
                    continue
                d = self._pending.popleft()
                if isinstance(d, m.Team):
                    self._running = (JOINING_TEAM,)  # the watchdog beats while the collective join waits
                    self._join_deadline = time.monotonic() + TEAM_STEP_S
                    parts = []
                else:
                    parts = [
                        p
                        for p in (d.parts if isinstance(d, m.BatchDispatch) else [d])
                        if p.dispatch_id not in self._aborted
                    ]
                    if not parts:
                        continue
                    self._running = tuple(p.dispatch_id for p in parts)
            # without the lock: the watchdog may use the socket meanwhile
            results = [self._join_team(d)] if isinstance(d, m.Team) else self._run_parts(parts)
            with self._io:
                self._running = ()
                for result in results:
                    self._send(sock, result)
        self.preloader.stop()
        if self.refused is None:
            self._send(sock, m.Bye("shutdown"), retry=False)
        sock.close()
        self._close()

    def _close(self) -> None:
        self.plane.close()
        shutil.rmtree(WEIGHTS_DIR / self.prefix.strip("-"), ignore_errors=True)


SEND_TIMEOUT_MS = 1000  # how long one send waits for a head to be connected
JOINING_TEAM = -1  # in `_running` while the collective NVSHMEM join waits (no dispatch has this id)
TEAM_STEP_S = 120.0  # the longest a team step (leave and join, collective) may take before the process exits


def _host_of(address: str) -> str:
    """`HOST` of `tcp://HOST:PORT`."""
    return address[len("tcp://") :].rsplit(":", 1)[0].strip("[]")


class ArenaIO(TensorIO):
    """Across processes: inputs pulled one-sidedly from their producers' arenas onto the executor's
    device, outputs published into its own arena; only their metadata goes back to the head."""

    def __init__(self, plane: ExecutorDataPlane) -> None:
        self.plane = plane
        self._inv: CallInputs | None = None

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        with self.plane.invocation() as inv:
            self._inv = inv
            try:
                yield
            finally:
                self._inv = None

    def inputs(self, fn: ModelFn, part: Part) -> dict[str, Any]:
        assert self._inv is not None, "inputs are pulled inside scope()"
        callbacks = {k for k in part.inputs if k in fn.inputs and fn.inputs[k].callback}
        # The caller holds one reference to every input until the call returns, so a re-run on another
        # executor can pull them again: this executor reads without releasing.
        inputs: dict[str, Any] = self._inv.inputs(part.inputs, callbacks=callbacks, release=False)
        inputs.update({k: None for k in part.nulls})
        return inputs

    def input_bytes(self, part: Part) -> int:
        return sum(meta.nbytes for meta in part.inputs.values())

    def deliver(self, outputs: dict[str, torch.Tensor | None]) -> dict[str, TensorHandle]:
        return self.plane.publish(outputs, readers=1)

    def finish(self) -> None:
        self.plane.store.collect()


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The executor's options (also those of `comfy-cluster executor`)."""
    p.add_argument("--head", required=True, help="the head's address: ipc://PATH or tcp://HOST:PORT")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--threads", type=int, default=1, help="torch threads (CPU)")
    p.add_argument(
        "--data-plane",
        choices=remote.MODES,
        default=None,
        help="how inputs of other executors are read: auto (shared memory on this host, TCP from "
        "others), shm, or tcp (TCP from every other executor: the cross-host path on one host); "
        f"default: ${remote.MODE_ENV} or auto",
    )
    p.add_argument(
        "--data-ip",
        default=None,
        help="the IP address other hosts reach this executor's data socket at (default: this "
        "machine's address on the route to the head)",
    )
    p.add_argument(
        "--memory-budget",
        type=int,
        default=None,
        help="bytes shared by the arena, active inference and cached weights (default: a GPU's "
        "free memory less max(8 GiB, 10 %% of the device), or 8 GiB on the CPU)",
    )
    p.add_argument("--device-share", type=int, default=1, help="executors on this device (they split its memory)")
    p.add_argument("--host-share", type=int, default=1, help="executors on this host (they split its memory)")
    p.add_argument("--arena-bytes", type=int, default=64 << 20, help="bytes of the communication arena")
    p.add_argument(
        "--host-bytes",
        type=int,
        default=None,
        help="bytes of models kept in host memory before spilling to disk (default: the budget; "
        "beside a GPU at most a quarter of the machine's memory)",
    )
    p.add_argument("--preload", action="append", default=[], help="module to import (registers ModelFns)")
    p.add_argument(
        "--h2d-bandwidth",
        type=float,
        default=None,
        help="bytes/s to emulate for host -> device weight copies (benchmarks and tests of "
        "prefix loading and preloading on the CPU, where a copy is otherwise free)",
    )
    p.add_argument(
        "--provider",
        action="append",
        default=[],
        help="module that registers ModelFns, imported on the first ModelFn it does not know yet "
        "(besides the entry-point group comfy_cluster.modelfns, which installed packages declare)",
    )
    p.add_argument(
        "--warm-up",
        action="store_true",
        help="import every provider and warm its ModelFns up before registering (cluster.modelfn."
        "warm_up_all), so the first invocation pays no import; `serve` starts its executors so",
    )
    p.add_argument("--id", default=None, help="executor id (default: host-pid-random)")
    p.add_argument("--heartbeat", type=float, default=0.5, help="seconds between heartbeats")
    p.add_argument("--exit-with-parent", action="store_true", help="stop when the parent process exits")
    p.add_argument(
        "--parent-pid",
        type=int,
        default=None,
        help="with --exit-with-parent: the launching process (default: the parent at start)",
    )


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m cluster.executor", description=__doc__.split("\n")[0])
    add_arguments(p)
    return p.parse_args(argv)


def prepare_executor(args: argparse.Namespace, secret: bytes | None) -> Executor:
    """An executor with `add_arguments`' options, its providers imported (and warmed up with --warm-up),
    ready to `run()`: the part of starting one that a process and a Ray actor share."""
    return make_executor(args, secret, load_providers(args))


def load_providers(args: argparse.Namespace) -> tuple[list[str], float]:
    """Import the providers (and warm them up with --warm-up): what warm_up_all warmed and its seconds."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s executor %(process)d %(levelname)s %(message)s")
    faulthandler.enable()  # a crash in native code leaves its Python traceback on stderr, for the supervisor
    if args.data_plane is not None:
        remote.set_mode(args.data_plane)
    if args.head.startswith("tcp://"):  # maybe another machine: its model files are this one's copies
        refs.verify_digests()
    add_providers(*args.provider)
    for mod in args.preload:
        importlib.import_module(mod)
    warmed: tuple[list[str], float] = ([], 0.0)
    if args.warm_up:
        torch.set_num_threads(args.threads)  # the warm-up's first calls set up the pool it will run on
        t0 = time.perf_counter()
        warmed = (warm_up_all(), time.perf_counter() - t0)
    return warmed


def make_executor(args: argparse.Namespace, secret: bytes | None, warmed: tuple[list[str], float]) -> Executor:
    """The executor (its data plane: segments, sockets) of `add_arguments`' options, providers loaded."""
    executor = Executor(
        args.head,
        args.device,
        args.threads,
        args.memory_budget,
        args.id,
        args.heartbeat,
        args.exit_with_parent,
        args.arena_bytes,
        args.host_bytes,
        args.device_share,
        args.host_share,
        args.parent_pid if args.exit_with_parent else None,
        warmed,
        secret,
        args.data_ip,
        args.h2d_bandwidth,
    )
    executor.rejoin = getattr(args, "rejoin", False)
    return executor


def run_executor(args: argparse.Namespace, secret: bytes | None) -> int:
    """Run an executor with `add_arguments`' options until it is shut down; 2 when the head refused it."""
    if args.exit_with_parent:
        # Ctrl-C reaches the whole process group: a supervised executor leaves it to its head, which
        # shuts it down (or it follows the head out when the head dies)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, stop_starting)
    warmed = load_providers(args)
    # from here on it makes its data plane: a SIGTERM meanwhile stops it once that is made (and so unlinked)
    stopped: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopped.append(signum))
    executor = make_executor(args, secret, warmed)
    gc.freeze()  # the modules, classes and tables of the start-up live as long as the process
    gc.enable()

    def stop(signum: int, frame: Any) -> None:
        executor.stop()

    signal.signal(signal.SIGTERM, stop)
    if stopped:
        executor.stop()
    if not args.exit_with_parent:
        signal.signal(signal.SIGINT, stop)
    executor.run()
    return 2 if executor.refused else 0


def main(argv: list[str] | None = None) -> int:
    return run_executor(
        parse_args(sys.argv[1:] if argv is None else argv), cluster_secret.read_secret()
    )  # the secret from the environment, if any
