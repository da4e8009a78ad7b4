"""A head and N executor processes on this machine (`comfy-cluster serve --executors N`).

    head, runtime = start_local_cluster(2, threads_per_executor=1)
    ...
    stop()            # or head.stop(): stops the executors it started too

Executors connect over ipc:// and are supervised: one that exits (killed, or aborted after a hung
invocation) is replaced by a fresh process unless `restart=False`.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from cluster.cluster_runtime import ClusterRuntime
from cluster.head import Head

log = logging.getLogger("cluster.local")
REPO = Path(__file__).resolve().parents[1]
_clusters: list["LocalCluster"] = []


class LocalCluster:
    def __init__(self, head: Head, n: int, threads: int, memory_budget: int | None, preload: Sequence[str],
                 devices: Sequence[str], restart: bool, env: dict[str, str] | None) -> None:
        self.head = head
        self.threads, self.memory_budget, self.preload = threads, memory_budget, list(preload)
        self.devices = [list(devices)[i % len(devices)] for i in range(n)]   # executor i's device
        self.restart = restart
        self.env = {**os.environ, **(env or {})}
        # the executors import this repo's packages (and test modules named in --preload)
        self.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), self.env.get("PYTHONPATH")) if p)
        self.procs: list[subprocess.Popen] = [self._spawn(i) for i in range(n)]
        self._stopping = False
        self._lock = threading.Lock()
        self._watch = threading.Thread(target=self._supervise, name="cluster-supervisor", daemon=True)
        self._watch.start()

    def _spawn(self, i: int) -> subprocess.Popen:
        device = self.devices[i]
        cmd = [sys.executable, "-m", "cluster.executor", "--head", self.head.address, "--device", device,
               "--device-share", str(self.devices.count(device)), "--host-share", str(len(self.devices)),
               "--threads", str(self.threads), "--heartbeat", str(self.head.heartbeat_s), "--exit-with-parent"]
        if self.memory_budget is not None:   # else the executor's default for its device
            cmd += ["--memory-budget", str(self.memory_budget)]
        for mod in self.preload:
            cmd += ["--preload", mod]
        return subprocess.Popen(cmd, cwd=REPO, env=self.env)

    def _supervise(self) -> None:
        while not self._stopping:
            time.sleep(0.2)
            with self._lock:
                for i, p in enumerate(self.procs):
                    if p.poll() is not None and not self._stopping and self.restart:
                        log.warning("executor pid %d exited with %s; starting a new one", p.pid, p.returncode)
                        self.procs[i] = self._spawn(i)

    def pids(self) -> list[int]:
        with self._lock:
            return [p.pid for p in self.procs]

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping = True
        self._watch.join(timeout=1)
        end = time.monotonic() + timeout
        for p in self.procs:   # the head sent Shutdown; give them a moment, then insist
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def start_local_cluster(n: int, threads_per_executor: int = 1, *, memory_budget: int | None = None,
                        preload: Sequence[str] = (), devices: Sequence[str] = ("cpu",), restart: bool = True,
                        tenant: str = "default", wait_s: float = 120.0, env: dict[str, str] | None = None,
                        **head_kw: Any) -> tuple[Head, ClusterRuntime]:
    """Start a head (its options in `head_kw`: policy, delta, deadline_s, lost_after_s, ...) and `n`
    executor processes, executor i on `devices[i % len(devices)]`; returns once all have registered."""
    head = Head(**head_kw).start()
    try:
        cluster = LocalCluster(head, n, threads_per_executor, memory_budget, preload, devices, restart, env)
    except Exception:
        head.stop()
        raise
    head.on_stop(cluster.stop)
    head.local_cluster = cluster
    _clusters.append(cluster)
    try:
        head.wait_for_executors(n, timeout=wait_s)
    except Exception:
        head.stop()
        raise
    return head, ClusterRuntime(head, tenant)


def stop() -> None:
    """Stop every cluster this process started."""
    while _clusters:
        _clusters.pop().head.stop()
