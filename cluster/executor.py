"""The executor process: runs invocations the head dispatches to it, one at a time.

    python -m cluster.executor --head ipc:///tmp/head.sock --device cpu --threads 2 \
        --memory-budget 4000000000 [--preload tests.cluster.cluster_fns]

The main thread owns the ZeroMQ DEALER socket (registration, heartbeats, results); a worker thread
runs the ModelFns, so heartbeats continue while a long invocation runs. Inputs are read from, and
outputs written to, named shared memory (cluster.shm); the socket carries metadata only. Weights are
kept in an LRU cache bounded by the memory budget. An invocation the head aborts (past its deadline)
cannot be interrupted inside a Python thread, so the executor says goodbye and exits; whoever
supervises it starts a fresh one.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import pickle
import queue
import socket
import sys
import threading
import time
import traceback
import uuid
from collections import OrderedDict
from typing import Any

import torch
import zmq

from cluster import messages as m
from cluster import shm
from cluster.modelfn import ModelFn, get_model_fn
from cluster.refs import ModelRef

log = logging.getLogger("cluster.executor")


def model_bytes(obj: Any, _seen: set[int] | None = None) -> int:
    """Bytes of the tensors held by a loaded model (modules, tensors, and containers of them)."""
    seen = _seen if _seen is not None else set()
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, torch.nn.Module):
        return sum(model_bytes(t, seen) for t in list(obj.parameters()) + list(obj.buffers()))
    if isinstance(obj, dict):
        return sum(model_bytes(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(model_bytes(v, seen) for v in obj)
    if hasattr(obj, "__dict__"):
        return sum(model_bytes(v, seen) for v in vars(obj).values()
                   if isinstance(v, (torch.Tensor, torch.nn.Module, dict, list, tuple)))
    return 0


class WeightCache:
    """Loaded models by (ModelFn, ModelRef.key), least recently used evicted past the budget."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._models: OrderedDict[tuple[str, str], tuple[Any, int]] = OrderedDict()
        self.used = 0

    def get(self, fn: ModelFn, ref: ModelRef) -> tuple[Any, float]:
        """(model, seconds spent loading it now)."""
        key = (fn.name, ref.key)
        if key in self._models:
            self._models.move_to_end(key)
            return self._models[key][0], 0.0
        t0 = time.perf_counter()
        model = fn.load_model(ref)
        size = model_bytes(model)
        self._models[key] = (model, size)
        self.used += size
        while self.used > self.budget and len(self._models) > 1:
            _, (_, freed) = self._models.popitem(last=False)
            self.used -= freed
        return model, time.perf_counter() - t0

    def keys(self) -> list[str]:
        return sorted({ref_key for _, ref_key in self._models})


class Executor:
    def __init__(self, head: str, device: str = "cpu", threads: int = 1, memory_budget: int = 8 << 30,
                 executor_id: str | None = None, heartbeat_s: float = 0.5, exit_with_parent: bool = False) -> None:
        self.head = head
        self.device = device
        self.threads = threads
        self.id = executor_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.prefix = shm.segment_prefix(self.id)
        self.heartbeat_s = heartbeat_s
        self.cache = WeightCache(memory_budget)
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
        try:
            ref, params = pickle.loads(d.payload)
            inputs: dict[str, Any] = shm.read_tensors(d.inputs)
            inputs.update({k: None for k in d.nulls})
            fn = self._fns.get(d.fn)
            if fn is None:
                fn = self._fns[d.fn] = get_model_fn(d.fn)()
            with torch.inference_mode():
                model, load_s = self.cache.get(fn, ref) if ref is not None else (None, 0.0)
                out = fn.execute(model, inputs, params)
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
            tensors = {k: v for k, v in out.items() if v is not None}
            metas = shm.write_tensors(self.prefix, tensors, owner=self.id)
            wall = time.perf_counter() - t_wall
            measured = wall if self.device.startswith("cuda") else self._cpu_clock() - t_cpu
            return m.Done(d.dispatch_id, metas, [k for k, v in out.items() if v is None], measured, wall,
                          load_s, self.cache.used, self.cache.keys())
        except Exception as e:  # reported to the caller, which raises it
            return m.Failed(d.dispatch_id, f"{type(e).__name__}: {e}", traceback.format_exc(),
                            self._cpu_clock() - t_cpu)

    # the main thread ------------------------------------------------------------------------------
    def _register(self, sock: zmq.Socket) -> None:
        sock.send(m.encode(m.Register(self.id, socket.gethostname(), os.getpid(), self.device, self.threads,
                                      self.cache.budget, self.cache.used, self.cache.keys(), self.prefix)))

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
                sock.send(m.encode(m.Heartbeat(busy, self.cache.used, self.cache.keys())))
                next_beat = time.monotonic() + self.heartbeat_s
                if self.parent is not None and os.getppid() != self.parent:
                    log.warning("parent process exited; stopping")
                    self._stop = True
        self._work.put(None)
        sock.send(m.encode(m.Bye("shutdown")))
        sock.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m cluster.executor", description=__doc__.split("\n")[0])
    p.add_argument("--head", required=True, help="the head's address: ipc://PATH or tcp://HOST:PORT")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch threads (CPU)")
    p.add_argument("--memory-budget", type=int, default=8 << 30, help="bytes of cached weights")
    p.add_argument("--preload", action="append", default=[], help="module to import (registers ModelFns)")
    p.add_argument("--id", default=None, help="executor id (default: host-pid-random)")
    p.add_argument("--heartbeat", type=float, default=0.5, help="seconds between heartbeats")
    p.add_argument("--exit-with-parent", action="store_true", help="stop when the parent process exits")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s executor %(process)d %(levelname)s %(message)s")
    for mod in args.preload:
        importlib.import_module(mod)
    Executor(args.head, args.device, args.threads, args.memory_budget, args.id, args.heartbeat,
             args.exit_with_parent).run()


if __name__ == "__main__":
    sys.exit(main())
