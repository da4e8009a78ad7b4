"""`serve` stopped by SIGTERM right after it begins listening, while its executor is still starting
(importing and warming up its model code): the server and the executor are gone within seconds, the
executor ending itself (not killed), with nothing left in /dev/shm or the temp folder (sockets, the torch
pin file). (On a machine whose executor registers before the server listens this checks a stop after
registration; tests/cluster/test_executor_stops_while_starting.py holds an executor in its start for sure.)"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

from cluster.dataplane.segments import SHM_DIR

REPO = Path(__file__).resolve().parents[2]


def test_sigterm_while_the_executor_starts_ends_everything_promptly(demo_workspace, tmp_path):
    tmpdir, log = tmp_path / "tmp", tmp_path / "server.log"
    tmpdir.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "comfy_bridge.cli",
            "serve",
            "--workspace",
            str(demo_workspace.root),
            "--port",
            str(port),
            "--executors",
            "1",
            "--executor-threads",
            "1",
            "--state-db",
            "memory",
        ],
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(tmpdir)},
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.time() + 180
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/system_stats", timeout=2).read()
            break
        except OSError:
            assert server.poll() is None and time.time() < deadline, log.read_text()
            time.sleep(0.05)
    executors = [c for c in psutil.Process(server.pid).children() if "cluster.executor" in " ".join(c.cmdline())]
    assert len(executors) == 1
    server.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    server.wait(60)
    _, alive = psutil.wait_procs(executors, timeout=30)
    took = time.monotonic() - t0
    output = log.read_text()
    assert not alive
    assert took < 3.0, f"stopping took {took:.1f} s:\n{output[-3000:]}"
    after = output[output.index("SIGTERM received") :]  # (at start, serve reclaims what killed processes left)
    assert "did not stop" not in after and "leftover" not in after, after  # it ended itself, left nothing
    pids = [server.pid, executors[0].pid]
    left = [
        n
        for folder in (SHM_DIR, str(tmpdir))
        for n in os.listdir(folder)
        if any(f"-{p}-" in n or n.startswith(f"cc-c{p}-") for p in pids)
    ]
    assert left == [], left
    assert "Traceback" not in output
