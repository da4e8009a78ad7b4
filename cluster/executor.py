"""The executor process: runs invocations the head dispatches to it, one at a time.

    python -m cluster.executor --head ipc:///tmp/head.sock --device cpu --threads 2 \
        --memory-budget 4000000000 [--preload tests.cluster.cluster_fns]

The main thread owns the ZeroMQ DEALER socket (registration, heartbeats, results); a worker thread
runs the ModelFns, so heartbeats continue while a long invocation runs. The executor's data plane
(cluster.dataplane.plane) holds one memory budget shared by its arena, active inference and cached
weights: inputs are pulled one-sidedly from their producers' arenas, outputs are published into its
own arena and only their metadata travels in the reply; weights live in the per-layer cache (LRU
model first, last layers first). An invocation the head aborts (past its deadline)
cannot be interrupted inside a Python thread, so the executor says goodbye and exits; whoever
supervises it starts a fresh one.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import pickle
import queue
import shutil
import socket
import sys
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

import torch
import zmq

from cluster import messages as m
from cluster.dataplane.plane import ExecutorDataPlane
from cluster.dataplane.segments import SegmentError, safe_prefix
from cluster.executor_models import ExecutorModels
from cluster.modelfn import ModelFn, get_model_fn

log = logging.getLogger("cluster.executor")
# where the host tier spills whole models past its capacity (one folder per executor, removed on exit)
WEIGHTS_DIR = Path.home() / ".cache" / "comfy-cluster" / "weights"


class Executor:
    def __init__(self, head: str, device: str = "cpu", threads: int = 1, memory_budget: int = 8 << 30,
                 executor_id: str | None = None, heartbeat_s: float = 0.5, exit_with_parent: bool = False,
                 arena_bytes: int = 64 << 20, host_bytes: int | None = None) -> None:
        self.head = head
        self.device = device
        self.threads = threads
        self.id = executor_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.prefix = safe_prefix(self.id)
        self.heartbeat_s = heartbeat_s
        self.memory_budget = memory_budget
        self.plane = ExecutorDataPlane(self.id, memory_budget, min(arena_bytes, memory_budget), device,
                                       weights_dir=WEIGHTS_DIR / self.prefix.strip("-"),
                                       host_bytes=memory_budget if host_bytes is None else host_bytes)
        self.models = ExecutorModels(self.plane.cache)
        self.parent = os.getppid() if exit_with_parent else None
        self._fns: dict[str, ModelFn] = {}
        self._work: queue.Queue[m.Dispatch | None] = queue.Queue()
        self._results: queue.Queue[m.Done | m.Failed] = queue.Queue()
        self._aborted: set[int] = set()
        self._running: int | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._stop = False

    # the worker thread ----------------------------------------------------------------------------
    def _cpu_clock(self) -> float:
        # One torch thread: all compute is this thread's. Several: torch's pool does it, and the
        # executor runs one invocation at a time, so the process's CPU time is the invocation's.
        return time.thread_time() if self.threads == 1 else time.process_time()

    def _work_loop(self) -> None:
        torch.set_num_threads(self.threads)
        while (d := self._work.get()) is not None:
            if d.dispatch_id in self._aborted:
                continue
            self._running = d.dispatch_id
            self._results.put(self._run(d))
            self._running = None
            self._wake_w.send(b"x")

    def _run(self, d: m.Dispatch) -> m.Done | m.Failed:
        t_wall, t_cpu = time.perf_counter(), self._cpu_clock()
        stage = "inputs"
        try:
            ref, params = pickle.loads(d.payload)
            fn = self._fns.get(d.fn)
            if fn is None:
                fn = self._fns[d.fn] = get_model_fn(d.fn)()
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
            metas = {k: m.TensorMeta(h.segment, h.offset, h.dtype, list(h.shape), h.nbytes, h.owner, h.refs,
                                     h.slot, h.generation, h.pe) for k, h in handles.items()}
            wall = time.perf_counter() - t_wall
            measured = wall if self.device.startswith("cuda") else self._cpu_clock() - t_cpu
            return m.Done(d.dispatch_id, metas, [k for k, v in out.items() if v is None], measured, wall,
                          load_s, self.plane.memory_used(), self.models.resident())
        except Exception as e:  # reported to the caller, which raises it
            return m.Failed(d.dispatch_id, f"{type(e).__name__}: {e}", traceback.format_exc(),
                            self._cpu_clock() - t_cpu, lost_input=stage == "inputs" and isinstance(e, SegmentError))

    def _model(self, fn: ModelFn, ref: Any):
        return self.models.use(fn, ref) if ref is not None else contextlib.nullcontext((None, 0.0))

    # the main thread ------------------------------------------------------------------------------
    def _register(self, sock: zmq.Socket) -> None:
        sock.send(m.encode(m.Register(self.id, socket.gethostname(), os.getpid(), self.device, self.threads,
                                      self.memory_budget, self.plane.memory_used(), self.models.resident(),
                                      self.prefix)))

    def _handle(self, sock: zmq.Socket, msg: m.Welcome | m.Dispatch | m.Abort | m.Reset | m.Shutdown) -> None:
        if isinstance(msg, m.Dispatch):
            self._work.put(msg)
        elif isinstance(msg, m.Welcome):
            self.heartbeat_s = msg.heartbeat_s
        elif isinstance(msg, m.Reset):
            self._register(sock)
        elif isinstance(msg, m.Abort):
            if self._running == msg.dispatch_id:
                # A Python thread cannot be interrupted; a fresh process is the clean way out.
                log.error("aborting hung dispatch %d (%s); exiting", msg.dispatch_id, msg.reason)
                sock.send(m.encode(m.Bye(f"aborted dispatch {msg.dispatch_id}: {msg.reason}")))
                sock.close(linger=200)
                os._exit(3)
            self._aborted.add(msg.dispatch_id)
        elif isinstance(msg, m.Shutdown):
            self._stop = True

    def run(self) -> None:
        ctx = zmq.Context.instance()
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.IDENTITY, self.id.encode())
        sock.setsockopt(zmq.LINGER, 500)
        sock.connect(self.head)
        worker = threading.Thread(target=self._work_loop, name="executor-work", daemon=True)
        worker.start()
        self._register(sock)
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(self._wake_r, zmq.POLLIN)
        next_beat = time.monotonic() + self.heartbeat_s
        while not self._stop:
            events = dict(poller.poll(max(0.0, next_beat - time.monotonic()) * 1000))
            if sock in events:
                while sock.poll(0):
                    try:
                        self._handle(sock, m.executor_decoder.decode(sock.recv()))
                    except Exception as e:  # a bad frame from the head must not kill the executor
                        log.warning("dropped a bad message from the head: %s", e)
            if self._wake_r.fileno() in events:
                self._wake_r.recv(4096)
            while not self._results.empty():
                sock.send(m.encode(self._results.get()))
            if time.monotonic() >= next_beat:
                busy = self._work.qsize() + (self._running is not None)
                sock.send(m.encode(m.Heartbeat(busy, self.plane.memory_used(), self.models.resident())))
                next_beat = time.monotonic() + self.heartbeat_s
                if self.parent is not None and os.getppid() != self.parent:
                    log.warning("parent process exited; stopping")
                    self._stop = True
        self._work.put(None)
        sock.send(m.encode(m.Bye("shutdown")))
        sock.close()
        self.plane.close()
        shutil.rmtree(WEIGHTS_DIR / self.prefix.strip("-"), ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m cluster.executor", description=__doc__.split("\n")[0])
    p.add_argument("--head", required=True, help="the head's address: ipc://PATH or tcp://HOST:PORT")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch threads (CPU)")
    p.add_argument("--memory-budget", type=int, default=8 << 30,
                   help="bytes shared by the arena, active inference and cached weights")
    p.add_argument("--arena-bytes", type=int, default=64 << 20, help="bytes of the communication arena")
    p.add_argument("--host-bytes", type=int, default=None,
                   help="bytes of models kept in host memory before spilling to disk (default: the budget)")
    p.add_argument("--preload", action="append", default=[], help="module to import (registers ModelFns)")
    p.add_argument("--id", default=None, help="executor id (default: host-pid-random)")
    p.add_argument("--heartbeat", type=float, default=0.5, help="seconds between heartbeats")
    p.add_argument("--exit-with-parent", action="store_true", help="stop when the parent process exits")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s executor %(process)d %(levelname)s %(message)s")
    for mod in args.preload:
        importlib.import_module(mod)
    Executor(args.head, args.device, args.threads, args.memory_budget, args.id, args.heartbeat,
             args.exit_with_parent, args.arena_bytes, args.host_bytes).run()


if __name__ == "__main__":
    sys.exit(main())
