"""An executor started for a head that is gone (killed while the executor was still starting) does
not wait for it for ever: ZeroMQ would block its first send, so it must notice its parent left."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]


def test_an_executor_whose_head_died_before_it_registered_exits(tmp_path):
    # A parent that starts an executor for a head socket nobody listens on, prints its pid and exits.
    launcher = textwrap.dedent(f"""
        import os, subprocess, sys
        p = subprocess.Popen([sys.executable, "-m", "cluster.executor", "--head", "ipc://{tmp_path}/gone.sock",
                              "--exit-with-parent", "--parent-pid", str(os.getpid()),
                              "--memory-budget", "200000000"], cwd={str(REPO)!r},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(p.pid, flush=True)
    """)
    out = subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True, timeout=60, check=True)
    executor = psutil.Process(int(out.stdout.strip()))
    try:
        executor.wait(timeout=120)  # it starts (imports torch), fails to reach the head, sees its parent gone
    except psutil.TimeoutExpired:
        executor.kill()
        raise AssertionError("the orphaned executor kept waiting for its head") from None
