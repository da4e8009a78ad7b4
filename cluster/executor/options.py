"""The command line of an executor a launcher starts, and the head's address fixed before the head exists.

No torch here: `serve` starts its executor processes first thing, before it imports torch and the server
(seconds), so that they import theirs at the same time (cluster.executor.local_cluster)."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Sequence

from cluster.executor.providers import added_providers

HEARTBEAT_S = 0.5  # the head's default; it tells each executor its own in the Welcome


def default_address() -> str:
    """A fresh ipc:// address for a head of this process (cluster.executor.reclaim removes those of dead processes)."""
    return f"ipc://{tempfile.gettempdir()}/cc-head-{os.getpid()}-{uuid.uuid4().hex[:8]}.sock"


def executor_argv(
    head: str,
    device: str,
    *,
    threads: int,
    heartbeat_s: float,
    device_share: int = 1,
    host_share: int = 1,
    memory_budget: int | None = None,
    preload: Sequence[str] = (),
    warm_up: bool = False,
) -> list[str]:
    """The options of an executor a launcher starts (a local process, a Ray actor): the providers this
    process has added go with them, since what the head's process can run, its executors can run."""
    argv = [
        "--head",
        head,
        "--device",
        device,
        "--device-share",
        str(device_share),
        "--host-share",
        str(host_share),
        "--threads",
        str(threads),
        "--heartbeat",
        str(heartbeat_s),
    ]
    if memory_budget is not None:  # else the executor's default for its device
        argv += ["--memory-budget", str(memory_budget)]
    for mod in preload:
        argv += ["--preload", mod]
    if warm_up:
        argv.append("--warm-up")
    for mod in added_providers():
        argv += ["--provider", mod]
    return argv


def stop_starting(signum: int, frame: object) -> None:
    """SIGTERM while the process starts (its imports and warm-up take seconds): it holds nothing yet that
    needs cleaning up (no segment, no socket), so it ends at once, cleanly, rather than make its data plane
    and wait for a head that stopped (and be killed, leaving its segments behind)."""
    raise SystemExit(0)
