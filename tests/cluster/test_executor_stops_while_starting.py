"""SIGTERM (or its cluster stopping) while an executor process is still starting ends it at once and
cleanly: it exits by itself, is not killed, and leaves no segment behind."""

from __future__ import annotations

import os
import time

import zmq

from cluster.dataplane.segments import SHM_DIR
from cluster.executor.local_cluster import HeadContact, LocalCluster
from cluster.executor.process import Executor


def _segments_of(pid: int) -> list[str]:
    return [n for n in os.listdir(SHM_DIR) if f"-{pid}-" in n]


def test_a_cluster_stopped_while_its_executor_imports_its_providers(tmp_path):
    started = tmp_path / "started"
    # a provider module whose import takes the time torch's and the models' imports take, and then some
    (tmp_path / "slow_start_fns.py").write_text(
        f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(60)\n"
    )
    cluster = LocalCluster(
        HeadContact(f"ipc://{tmp_path}/head.sock"),
        1,
        1,
        100_000_000,
        ["slow_start_fns"],
        ["cpu"],
        restart=False,
        env={"PYTHONPATH": str(tmp_path)},
        supervise=False,
    )
    proc = cluster.procs[0]
    deadline = time.monotonic() + 120
    while not started.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the executor did not start"
        time.sleep(0.05)
    t0 = time.monotonic()
    cluster.stop()
    took = time.monotonic() - t0
    assert proc.returncode == 0, f"exit {proc.returncode}: it was killed instead of ending itself"
    assert took < 2.0, f"stopping took {took:.1f} s"
    assert _segments_of(proc.pid) == []


def test_an_executor_stopped_before_it_joins_never_joins(tmp_path):
    """Stopped (SIGTERM) after its data plane was made but before run(): it closes that and leaves, saying
    nothing to the head (a head told of it would dispatch to it, or a gone one would be waited for)."""
    head = zmq.Context.instance().socket(zmq.ROUTER)
    head.bind(f"ipc://{tmp_path}/head.sock")
    try:
        executor = Executor(f"ipc://{tmp_path}/head.sock", memory_budget=100_000_000, arena_bytes=1 << 20)
        mine = lambda: [n for n in os.listdir(SHM_DIR) if n.startswith(executor.prefix)]
        assert mine()  # its arena exists
        executor.stop()  # what SIGTERM's handler does
        executor.run()
        assert mine() == []
        assert head.poll(500) == 0, f"it said {head.recv_multipart()[1:]!r}"
    finally:
        head.close(linger=0)
