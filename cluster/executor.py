"""The executor process: runs invocations the head dispatches to it, one at a time.

    python -m cluster.executor --head ipc:///tmp/head.sock --device cpu --threads 2 \
        --memory-budget 4000000000 [--preload tests.cluster.cluster_fns]

The main thread receives dispatches, runs the ModelFns and sends the results on its ZeroMQ DEALER
socket itself: no thread handoff on the way in or out, which is most of a short call's latency. A
lock guards the socket; the main thread holds it except while a ModelFn runs, and only then does a
watchdog thread take it to send heartbeats and to answer the head (an abort of a hung invocation, a
shutdown), so a long invocation is not mistaken for a lost executor. The executor's data plane
(cluster.dataplane.plane) holds one memory budget shared by its arena, active inference and cached
weights: inputs are pulled one-sidedly from their producers' arenas, outputs are published into its
own arena and only their metadata travels in the reply; weights live in the per-layer cache (LRU
model first, last layers first). A `BatchDispatch` (compatible invocations of several requests) is
run as one call: each part's inputs pulled, merged along the batch, the ModelFn run once, the
outputs split and published per part, one Done per part charged its share of the measured time; if
the merged run fails, the parts are run one by one, so one part's bad input fails only that part.
An invocation the head aborts (past its deadline)
cannot be interrupted inside a Python thread, so the executor says goodbye and exits; whoever
supervises it starts a fresh one.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import faulthandler
import importlib
import logging
import os
import pickle
import shutil
import signal
import socket
import sys
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

import msgspec
import psutil
import torch
import zmq

from cluster import messages as m
from cluster.batching import Call, charge_shares, merge, run_merged
from cluster.dataplane.plane import ExecutorDataPlane
from cluster.dataplane import segments
from cluster.dataplane.segments import SegmentError, safe_prefix
from cluster.executor_models import ExecutorModels
from cluster.modelfn import ModelFn, get_model_fn
from cluster.providers import add_providers

log = logging.getLogger("cluster.executor")
# where the host tier spills whole models past its capacity (one folder per executor, removed on exit)
WEIGHTS_DIR = Path.home() / ".cache" / "comfy-cluster" / "weights"


class Executor:
    def __init__(self, head: str, device: str = "cpu", threads: int = 1, memory_budget: int | None = None,
                 executor_id: str | None = None, heartbeat_s: float = 0.5, exit_with_parent: bool = False,
                 arena_bytes: int = 64 << 20, host_bytes: int | None = None, device_share: int = 1,
                 host_share: int = 1, parent_pid: int | None = None) -> None:
        self.head = head
        if device == "cuda":   # a bare "cuda" is the current GPU: name its index, as set_device needs
            device = f"cuda:{torch.cuda.current_device()}"
        self.device = device
        if device.startswith("cuda"):
            torch.cuda.set_device(torch.device(device))   # tensors a ModelFn makes on "cuda" land on this GPU
        self.threads = threads
        self.id = executor_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.prefix = safe_prefix(self.id)
        self.heartbeat_s = heartbeat_s
        if memory_budget is None:
            memory_budget = default_memory_budget(device, device_share)
        self.memory_budget = memory_budget
        self.plane = ExecutorDataPlane(self.id, memory_budget, min(arena_bytes, memory_budget), device,
                                       weights_dir=WEIGHTS_DIR / self.prefix.strip("-"),
                                       host_bytes=default_host_bytes(device, memory_budget, host_share)
                                       if host_bytes is None else host_bytes)
        self.models = ExecutorModels(self.plane.cache)
        # whose exit ends this executor; a launcher names itself, since it may be gone before we ask
        self.parent = parent_pid or (os.getppid() if exit_with_parent else None)
        self._fns: dict[str, ModelFn] = {}
        self._pending: collections.deque[m.Dispatch | m.BatchDispatch] = collections.deque()
        self._aborted: set[int] = set()
        self._running: tuple[int, ...] = ()      # dispatch ids of the run in progress
        self._io = threading.Lock()          # the socket's; see the module docstring
        self._next_beat = 0.0
        self._stop = False

    # the worker thread ----------------------------------------------------------------------------
    def _cpu_clock(self) -> float:
        # One torch thread: all compute is this thread's. Several: torch's pool does it, and the
        # executor runs one invocation at a time, so the process's CPU time is the invocation's.
        return time.thread_time() if self.threads == 1 else time.process_time()

    def _fn(self, name: str) -> ModelFn:
        fn = self._fns.get(name)
        if fn is None:
            fn = self._fns[name] = get_model_fn(name)()
        return fn

    def _metas(self, handles: dict[str, Any]) -> dict[str, m.TensorMeta]:
        return {k: m.TensorMeta(h.segment, h.offset, h.dtype, list(h.shape), h.nbytes, h.owner, h.refs,
                                h.slot, h.generation, h.pe) for k, h in handles.items()}

    def _run(self, d: m.Dispatch) -> m.Done | m.Failed:
        t_wall, t_cpu = time.perf_counter(), self._cpu_clock()
        stage = "inputs"
        try:
            ref, params = pickle.loads(d.payload)
            fn = self._fn(d.fn)
            callbacks = {k for k in d.inputs if k in fn.inputs and fn.inputs[k].callback}
            with self.plane.invocation() as inv:
                # The caller holds one reference to every input until the call returns, so a re-run
                # on another executor can pull them again: this executor reads without releasing.
                inputs: dict[str, Any] = inv.inputs(d.inputs, callbacks=callbacks, release=False)
                inputs.update({k: None for k in d.nulls})
                stage = "execute"
                activations = sum(meta.nbytes for meta in d.inputs.values())
                with torch.inference_mode(), self._model(fn, ref) as (model, load_s), \
                        self.plane.budget.reserve(activations):
                    out = fn.execute(model, inputs, params)
                if self.device.startswith("cuda"):
                    torch.cuda.synchronize()
                # published (copied) before the scope frees the pulled inputs an output may view
                handles = self.plane.publish(out, readers=1)
            self.plane.store.collect()
            wall = time.perf_counter() - t_wall
            measured = wall if self.device.startswith("cuda") else self._cpu_clock() - t_cpu
            return m.Done(d.dispatch_id, self._metas(handles), [k for k, v in out.items() if v is None], measured,
                          wall, load_s, self.plane.memory_used(), self.models.resident())
        except Exception as e:  # reported to the caller, which raises it
            return m.Failed(d.dispatch_id, f"{type(e).__name__}: {e}", traceback.format_exc(),
                            self._cpu_clock() - t_cpu, lost_input=stage == "inputs" and isinstance(e, SegmentError))

    def _run_batch(self, parts: list[m.Dispatch]) -> list[m.Done | m.Failed]:
        """The parts as one merged call; if that fails, one by one (each then fails on its own)."""
        try:
            return self._run_merged(parts)
        except Exception as e:
            log.warning("merged run of %d %r parts failed (%s: %s); running them one by one",
                        len(parts), parts[0].fn, type(e).__name__, e)
            return [self._run(d) for d in parts]

    def _run_merged(self, parts: list[m.Dispatch]) -> list[m.Done]:
        t_wall, t_cpu = time.perf_counter(), self._cpu_clock()
        fn = self._fn(parts[0].fn)
        with self.plane.invocation() as inv:
            calls = []
            for d in parts:
                ref, params = pickle.loads(d.payload)
                callbacks = {k for k in d.inputs if k in fn.inputs and fn.inputs[k].callback}
                inputs: dict[str, Any] = inv.inputs(d.inputs, callbacks=callbacks, release=False)
                inputs.update({k: None for k in d.nulls})
                calls.append(Call(d.fn, ref, inputs, params))
            merged = merge(calls)            # ValueError when the parts are not compatible after all
            activations = 2 * sum(meta.nbytes for d in parts for meta in d.inputs.values())  # inputs + merged copy
            with torch.inference_mode(), self._model(fn, merged.ref) as (model, load_s), \
                    self.plane.budget.reserve(activations):
                outs = run_merged(fn, model, merged)
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
            handles = [self.plane.publish(out, readers=1) for out in outs]
        self.plane.store.collect()
        wall = time.perf_counter() - t_wall
        measured = wall if self.device.startswith("cuda") else self._cpu_clock() - t_cpu
        shares = charge_shares(merged.sizes, measured)
        memory, resident = self.plane.memory_used(), self.models.resident()
        return [m.Done(d.dispatch_id, self._metas(h), [k for k, v in out.items() if v is None], share, wall,
                       load_s if i == 0 else 0.0, memory, resident, len(parts), measured)
                for i, (d, out, h, share) in enumerate(zip(parts, outs, handles, shares))]

    def _model(self, fn: ModelFn, ref: Any):
        return self.models.use(fn, ref) if ref is not None else contextlib.nullcontext((None, 0.0))

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
                if not retry:
                    return False

    def _register(self, sock: zmq.Socket) -> None:
        self._send(sock, m.Register(self.id, socket.gethostname(), os.getpid(), self.device, self.threads,
                                      self.memory_budget, self.plane.memory_used(), self.models.resident(),
                                      self.prefix))

    def _handle(self, sock: zmq.Socket, msg: m.ToExecutor) -> None:
        if isinstance(msg, (m.Dispatch, m.BatchDispatch)):
            self._pending.append(msg)
        elif isinstance(msg, m.Welcome):
            self.heartbeat_s = msg.heartbeat_s
        elif isinstance(msg, m.Reset):
            self._register(sock)
        elif isinstance(msg, m.Abort):
            if msg.dispatch_id in self._running:
                # A Python thread cannot be interrupted; a fresh process is the clean way out.
                log.error("aborting hung dispatch %d (%s); exiting", msg.dispatch_id, msg.reason)
                self._send(sock, m.Bye(f"aborted dispatch {msg.dispatch_id}: {msg.reason}"), retry=False)
                sock.close(linger=200)
                zmq.Context.instance().term()   # flushes the goodbye (os._exit would drop it)
                os._exit(3)
            self._aborted.add(msg.dispatch_id)
        elif isinstance(msg, m.Shutdown):
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
        self._send(sock, m.Heartbeat(busy, self.plane.memory_used(), self.models.resident()))
        self._next_beat = time.monotonic() + self.heartbeat_s
        if self._orphaned():
            log.warning("parent process exited; stopping")
            self._stop = True

    def _watch(self, sock: zmq.Socket) -> None:
        """While a ModelFn runs: heartbeats, and the head's messages (an abort exits from here)."""
        while not self._stop:
            time.sleep(min(self.heartbeat_s, 0.1))
            if not self._running or not self._io.acquire(blocking=False):
                continue   # the main thread is at the socket: it does this itself
            try:
                if self._running:
                    self._drain(sock)
                    self._beat(sock)
                    if self._orphaned():
                        # orphaned while a ModelFn runs (maybe hung): nobody to finish it for
                        segments.unlink_prefix(self.prefix)
                        shutil.rmtree(WEIGHTS_DIR / self.prefix.strip("-"), ignore_errors=True)
                        os._exit(4)
            finally:
                self._io.release()

    def run(self) -> None:
        torch.set_num_threads(self.threads)
        ctx = zmq.Context.instance()
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.IDENTITY, self.id.encode())
        sock.setsockopt(zmq.LINGER, 500)
        sock.setsockopt(zmq.SNDTIMEO, SEND_TIMEOUT_MS)
        sock.connect(self.head)
        self._register(sock)
        self._next_beat = time.monotonic() + self.heartbeat_s
        watchdog = threading.Thread(target=self._watch, args=(sock,), name="executor-watchdog", daemon=True)
        watchdog.start()
        while not self._stop:
            with self._io:
                if not self._pending:
                    sock.poll(max(0.0, self._next_beat - time.monotonic()) * 1000)
                self._drain(sock)
                self._beat(sock)
                if not self._pending or self._stop:
                    continue
                d = self._pending.popleft()
                parts = [p for p in (d.parts if isinstance(d, m.BatchDispatch) else [d])
                         if p.dispatch_id not in self._aborted]
                if not parts:
                    continue
                self._running = tuple(p.dispatch_id for p in parts)
            # without the lock: the watchdog may use the socket meanwhile
            results = self._run_batch(parts) if len(parts) > 1 else [self._run(parts[0])]
            with self._io:
                self._running = ()
                for result in results:
                    self._send(sock, result)
        self._send(sock, m.Bye("shutdown"), retry=False)
        sock.close()
        self.plane.close()
        shutil.rmtree(WEIGHTS_DIR / self.prefix.strip("-"), ignore_errors=True)


SEND_TIMEOUT_MS = 1000      # how long one send waits for a head to be connected
CPU_BUDGET = 8 << 30
GPU_RESERVE = 1 << 30       # left to the CUDA context, cuBLAS/cuDNN workspaces and the allocator's slack


def default_memory_budget(device: str, share: int = 1) -> int:
    """What an executor manages when not told: on a GPU, its share (`share` executors on the device) of
    the memory free at start less a reserve (the idle memory the layer cache and the arena harvest); on
    the CPU, 8 GiB."""
    if not device.startswith("cuda"):
        return CPU_BUDGET
    free, _ = torch.cuda.mem_get_info(torch.device(device))
    return max((free - GPU_RESERVE) // max(share, 1), GPU_RESERVE)


def default_host_bytes(device: str, memory_budget: int, share: int = 1) -> int:
    """Host memory for whole models before they spill to disk: as much as the budget on the CPU; beside a
    GPU at most a quarter of the machine's memory split over the `share` executors of the host (the pages
    are pinned, and every executor keeps its own)."""
    if not device.startswith("cuda"):
        return memory_budget
    return min(memory_budget, psutil.virtual_memory().total // 4 // max(share, 1))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m cluster.executor", description=__doc__.split("\n")[0])
    p.add_argument("--head", required=True, help="the head's address: ipc://PATH or tcp://HOST:PORT")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch threads (CPU)")
    p.add_argument("--memory-budget", type=int, default=None,
                   help="bytes shared by the arena, active inference and cached weights (default: a GPU's "
                        "free memory less 1 GiB, or 8 GiB on the CPU)")
    p.add_argument("--device-share", type=int, default=1, help="executors on this device (they split its memory)")
    p.add_argument("--host-share", type=int, default=1, help="executors on this host (they split its memory)")
    p.add_argument("--arena-bytes", type=int, default=64 << 20, help="bytes of the communication arena")
    p.add_argument("--host-bytes", type=int, default=None,
                   help="bytes of models kept in host memory before spilling to disk (default: the budget; "
                        "beside a GPU at most a quarter of the machine's memory)")
    p.add_argument("--preload", action="append", default=[], help="module to import (registers ModelFns)")
    p.add_argument("--provider", action="append", default=[],
                   help="module that registers ModelFns, imported on the first ModelFn it does not know yet "
                        "(besides the entry-point group comfy_cluster.modelfns, which installed packages declare)")
    p.add_argument("--id", default=None, help="executor id (default: host-pid-random)")
    p.add_argument("--heartbeat", type=float, default=0.5, help="seconds between heartbeats")
    p.add_argument("--exit-with-parent", action="store_true", help="stop when the parent process exits")
    p.add_argument("--parent-pid", type=int, default=None,
                   help="with --exit-with-parent: the launching process (default: the parent at start)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s executor %(process)d %(levelname)s %(message)s")
    faulthandler.enable()   # a crash in native code leaves its Python traceback on stderr, for the supervisor
    if args.exit_with_parent:
        # Ctrl-C reaches the whole process group: a supervised executor leaves it to its head, which
        # shuts it down (or it follows the head out when the head dies)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    add_providers(*args.provider)
    for mod in args.preload:
        importlib.import_module(mod)
    executor = Executor(args.head, args.device, args.threads, args.memory_budget, args.id, args.heartbeat,
                        args.exit_with_parent, args.arena_bytes, args.host_bytes, args.device_share,
                        args.host_share, args.parent_pid if args.exit_with_parent else None)

    def stop(signum: int, frame: Any) -> None:
        # leave as on Shutdown, after the invocation in progress: data plane closed, segments unlinked
        executor._stop = True
    signal.signal(signal.SIGTERM, stop)
    if not args.exit_with_parent:
        signal.signal(signal.SIGINT, stop)
    executor.run()


if __name__ == "__main__":
    sys.exit(main())
