"""A head and N executor processes on this machine (`comfy-cluster serve --executors N`).

    head, runtime = start_local_cluster(2, threads_per_executor=1)
    ...
    stop()            # or head.stop(): stops the executors it started too

Executors connect over ipc:// and are supervised: one that exits (killed, or aborted after a hung
invocation) is replaced by a fresh process unless `restart=False`, and the head learns at once why it
exited (its exit code or signal and the last lines of its stderr, where the fault handler writes a crash's
traceback), instead of from a missing heartbeat seconds later.

`serve` starts the processes before the head (`LocalCluster(HeadContact(default_address()), ...)`, then
`start_local_cluster(..., started=cluster)`): importing torch and the server takes its process seconds,
which its executors spend importing theirs. An executor connects to an ipc:// address nobody binds yet
(ZeroMQ retries until the head binds it). This module imports neither torch nor the head for that.
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from cluster import secret as cluster_secret
from cluster.executor.options import HEARTBEAT_S, executor_argv

if TYPE_CHECKING:
    from cluster.cluster_runtime import ClusterRuntime
    from cluster.control.head import Head

log = logging.getLogger("cluster.local")
REPO = Path(__file__).resolve().parents[2]
STDERR_TAIL_LINES = 40  # a fault handler trace: the faulting thread, the others, the extension list
_clusters: list[LocalCluster] = []


class StderrTail:
    """Forwards a child's stderr to ours line by line and keeps its last lines for a post-mortem."""

    def __init__(self, stream: IO[bytes], lines: int = STDERR_TAIL_LINES) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=lines)
        self._thread = threading.Thread(target=self._pump, args=(stream,), name="executor-stderr", daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[bytes]) -> None:
        with stream:
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", "replace")
                self.lines.append(line.rstrip("\n"))
                try:
                    sys.stderr.write(line)
                except (OSError, ValueError):  # our own stderr closed: keep collecting
                    pass

    def text(self, timeout: float = 1.0) -> str:
        """The last lines, once the child's stderr has closed (or after `timeout`)."""
        self._thread.join(timeout)
        return "\n".join(self.lines)


def exit_cause(returncode: int) -> str:
    """`exit code 3` or `killed by signal 11 (SIGSEGV: Segmentation fault)`."""
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = "unknown signal"
    return f"killed by signal {-returncode} ({name}: {signal.strsignal(-returncode) or '?'})"


@dataclass(frozen=True)
class HeadContact:
    """What executors started before their head need of it: where it will listen, its secret."""

    address: str
    secret: bytes | None = None
    heartbeat_s: float = HEARTBEAT_S


class LocalCluster:
    def __init__(
        self,
        head: Head | HeadContact,
        n: int,
        threads: int,
        memory_budget: int | None,
        preload: Sequence[str],
        devices: Sequence[str],
        restart: bool,
        env: dict[str, str] | None,
        warm_up: bool = False,
        executor_args: Sequence[str] = (),
        supervise: bool = True,
    ) -> None:
        """Start `n` executor processes for `head`; `supervise=False` (a HeadContact, no head yet): their
        exits are watched from `attach(head)` on."""
        self.head = head
        self.executor_args = list(executor_args)
        self.warm_up = warm_up
        self.threads, self.memory_budget, self.preload = threads, memory_budget, list(preload)
        self.devices = [list(devices)[i % len(devices)] for i in range(n)]  # executor i's device
        self.restart = restart
        self.env = {**os.environ, **(env or {})}
        # they prove to the head that they know its secret; with none, an inherited one would make
        # them ask a head that cannot answer
        if head.secret is not None:
            self.env[cluster_secret.ENV] = head.secret.decode()
        else:
            self.env.pop(cluster_secret.ENV, None)
        # the executors import this repo's packages (and test modules named in --preload)
        self.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), self.env.get("PYTHONPATH")) if p)
        self.tails: dict[int, StderrTail] = {}  # pid -> its stderr's last lines
        self.procs: list[subprocess.Popen] = [self._spawn(i) for i in range(n)]
        self._stopping = False
        self._lock = threading.Lock()
        self._watch: threading.Thread | None = None
        if supervise:
            self.attach(head)

    def attach(self, head: Head) -> None:
        """Supervise the executors for `head`, the head listening at the address they were given."""
        if head.address != self.head.address:
            raise ValueError(f"executors were started for {self.head.address}, the head listens at {head.address}")
        self.head = head
        self._watch = threading.Thread(target=self._supervise, name="cluster-supervisor", daemon=True)
        self._watch.start()

    def _spawn(self, i: int) -> subprocess.Popen:
        device = self.devices[i]
        cmd = [
            sys.executable,
            "-m",
            "cluster.executor",
            *executor_argv(
                self.head.address,
                device,
                threads=self.threads,
                heartbeat_s=self.head.heartbeat_s,
                device_share=self.devices.count(device),
                host_share=len(self.devices),
                memory_budget=self.memory_budget,
                preload=self.preload,
                warm_up=self.warm_up,
            ),
            "--exit-with-parent",
            "--parent-pid",
            str(os.getpid()),
            *self.executor_args,
        ]
        proc = subprocess.Popen(cmd, cwd=REPO, env=self.env, stderr=subprocess.PIPE)
        self.tails[proc.pid] = StderrTail(proc.stderr)
        return proc

    def _describe_exit(self, proc: subprocess.Popen, tail: StderrTail | None) -> str:
        cause = f"executor process {proc.pid} {exit_cause(proc.returncode)}"
        text = tail.text() if tail is not None else ""
        return cause + (f"; its last stderr lines:\n{text}" if text else "")

    def _report_exit(self, proc: subprocess.Popen) -> None:
        """Tell the head why this executor exited, with its stderr's last lines (a crash's traceback)."""
        why = self._describe_exit(proc, self.tails.pop(proc.pid, None))
        if proc.returncode != 0:
            log.warning("%s", why)
        self.head.executor_exited(proc.pid, why)

    def exit_cause(self, pid: int) -> str | None:
        """Why executor process `pid` exited, if it has (None: it runs, or is not ours): for the head, which
        may notice a crash (a failed send, a missing heartbeat) before this supervisor's next look. No lock:
        the supervisor holds ours while it calls into the head."""
        proc = next((p for p in list(self.procs) if p.pid == pid), None)
        if proc is None or proc.poll() is None:
            return None
        return self._describe_exit(proc, self.tails.get(pid))

    def _supervise(self) -> None:
        from cluster.executor.reclaim import reclaim_dead

        while not self._stopping:
            time.sleep(0.2)
            with self._lock:
                for i, p in enumerate(self.procs):
                    if p.poll() is None or p.pid not in self.tails or self._stopping:
                        continue
                    self._report_exit(p)
                    reclaim_dead([p.pid])  # a killed one's arena, reference table and spills
                    if self.restart:
                        log.warning("starting a new executor in place of pid %d", p.pid)
                        self.procs[i] = self._spawn(i)

    def pids(self) -> list[int]:
        with self._lock:
            return [p.pid for p in self.procs]

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping = True
        if self._watch is not None:
            self._watch.join(timeout=1)
        for p in self.procs:
            # The head sent Shutdown to those that registered; one still starting (seconds of imports and
            # warm-up) has not heard it and would wait for a head that is gone: SIGTERM tells every one,
            # and each ends itself (cluster.executor.process: at once while starting, else as on Shutdown).
            if p.poll() is None:
                p.terminate()
        end = time.monotonic() + timeout
        for p in self.procs:  # give them a moment, then insist
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("executor process %d did not stop within %.0f s: killed", p.pid, timeout)
                p.kill()
                p.wait()
        from cluster.executor.reclaim import reclaim_dead

        reclaim_dead([p.pid for p in self.procs])  # those that had to be killed could not clean up


def start_local_cluster(
    n: int,
    threads_per_executor: int = 1,
    *,
    memory_budget: int | None = None,
    preload: Sequence[str] = (),
    devices: Sequence[str] = ("cpu",),
    restart: bool = True,
    tenant: str = "default",
    wait_s: float | None = 120.0,
    env: dict[str, str] | None = None,
    warm_up: bool = False,
    executor_args: Sequence[str] = (),
    started: LocalCluster | None = None,
    **head_kw: Any,
) -> tuple[Head, ClusterRuntime]:
    """Start a head (its options in `head_kw`: address, secret, policy, delta, deadline_s, lost_after_s, ...)
    and `n` executor processes, executor i on `devices[i % len(devices)]`; returns once all have registered
    (n = 0 with a tcp:// address: a head that executors on other machines join), or with `wait_s` None at
    once: invocations submitted before an executor registers wait in the head's queue.
    `warm_up`: each executor imports its providers and warms their ModelFns up before registering
    (what `serve` wants; tests of the back end alone skip the seconds it takes). `executor_args`: more
    options for every executor (cluster.executor.process.add_arguments), e.g. `--h2d-bandwidth`.
    `started`: the executor processes, started already for a head at `started.head.address` (n of them)."""
    from cluster.cluster_runtime import ClusterRuntime
    from cluster.control.head import Head

    if started is not None:
        head_kw.update(address=started.head.address, secret=started.head.secret)
    head = Head(**head_kw).start()
    try:
        if started is not None:
            started.attach(head)
        cluster = started or LocalCluster(
            head, n, threads_per_executor, memory_budget, preload, devices, restart, env, warm_up, executor_args
        )
    except Exception:
        head.stop()
        raise
    head.on_stop(cluster.stop)
    head.local_cluster = cluster
    _clusters.append(cluster)
    if wait_s is not None:
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
