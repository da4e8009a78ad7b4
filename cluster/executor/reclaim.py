"""Reclaim what dead Comfy Cluster processes left on this host: shared-memory segments, head sockets
and executors' weight-spill folders.

A process that exits normally removes its own (executors close their data plane, the caller store
closes at exit, the head unlinks its socket), but a SIGKILL, an OOM kill or a crash leaves 64 MiB
arenas in /dev/shm and sockets in the temp folder. Every such name carries its owner's pid:

    cc-c<pid>-<hex6>-...            a head's caller store (cluster.dataplane.caller_store)
    cc-<host>-<pid>-<hex6>-...      an executor's arena, reference table and spills (this host only)
    cc-head-<pid>-<hex8>.sock       a head's ZeroMQ socket (cluster.executor.options.default_address)

A name is removed only when it matches one of these patterns and its owner is gone: no such process,
a zombie, or a process started after the file was last written (the pid was reused). Anything else,
including names of live processes and of other hosts sharing the folder, is left alone.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterable
from pathlib import Path

import psutil

from cluster.dataplane.segments import SHM_DIR, safe_prefix
from cluster.executor.process import WEIGHTS_DIR

log = logging.getLogger("cluster.reclaim")
_CALLER = re.compile(r"^cc-c(\d+)-[0-9a-f]{6}-")
_SOCKET = re.compile(r"^cc-head-(\d+)-[0-9a-f]{8}\.sock$")


def _executor_pattern(host: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(safe_prefix(host))}(\d+)-[0-9a-f]{{6}}(-|$)")


def owner_pid(name: str, host: str | None = None) -> int | None:
    """The pid a segment, socket or spill-folder name of ours carries; None for any other name."""
    for pattern in (_CALLER, _SOCKET, _executor_pattern(host or socket.gethostname())):
        match = pattern.match(name)
        if match:
            return int(match.group(1))
    return None


def owner_gone(pid: int, written_at: float) -> bool:
    """Whether the process that wrote a file last modified at `written_at` has exited."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return True
        # a live process that started after the file was last written cannot own it: the pid was reused
        # (one second of slack for clock granularity)
        return proc.create_time() > written_at + 1.0
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:  # someone else's process: alive, and not ours to judge
        return False


def reclaim_dead(
    pids: Iterable[int] | None = None,
    shm_dir: str = SHM_DIR,
    temp_dir: str | None = None,
    weights_dir: Path = WEIGHTS_DIR,
) -> list[str]:
    """Remove every segment, head socket and spill folder of ours whose owner is gone (only those of
    `pids` when given); returns the paths removed."""
    only = None if pids is None else set(pids)
    host = socket.gethostname()
    removed = []
    for folder in dict.fromkeys((shm_dir, temp_dir or tempfile.gettempdir(), str(weights_dir))):
        try:
            names = os.listdir(folder)
        except OSError:  # no such folder yet
            continue
        for name in names:
            pid = owner_pid(name, host)
            if pid is None or (only is not None and pid not in only) or pid == os.getpid():
                continue
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if not owner_gone(pid, st.st_mtime):
                continue
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            except FileNotFoundError:  # its owner's reaper got there first
                continue
            except OSError as err:
                log.warning("could not remove %s of dead process %d: %s", path, pid, err)
                continue
            removed.append(path)
    if removed:
        log.info("removed %d leftover(s) of dead processes: %s", len(removed), ", ".join(sorted(removed)))
    return removed
