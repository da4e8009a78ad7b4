"""Running the regular-expression nodes' matching in a separate process that can be stopped.

Python's `re` (ComfyUI's engine, whose syntax and results the nodes keep) holds the GIL for a whole
match and backtracks exponentially on patterns such as `(a+)+$`. Run in the server's process, one such
node froze every tenant's requests and no interrupt could reach it. So each match runs in a small
worker process (nodes/regex_worker.py) while the node's thread waits without holding the GIL, watching
the prompt's interrupt flag and the clock: an interrupt or the time limit kills the worker, and the
node fails with a clear error, its prompt only. The worker's memory is capped (RLIMIT_AS) and its
output stops at the text limit. Idle workers are kept for the next node, so a match costs a pipe
round trip, not a process start.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import json
import re
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from nodes import progress
from nodes.text_limits import check_length, max_text_chars

WORKER = Path(__file__).with_name("regex_worker.py")
SECONDS = 5.0  # the longest one regular-expression node may match (ComfyUI has no limit)
MEMORY_BYTES = 512 << 20  # the worker's address space: far above what a text at the limit needs
POLL_S = 0.02  # how often a waiting node looks at the interrupt flag
MAX_IDLE = 4  # workers kept for reuse (one per prompt running a regex node at once)

_idle: list[subprocess.Popen] = []
_lock = threading.Lock()


class RegexStopped(RuntimeError):
    """A regular-expression node was stopped: too slow, too much memory, or its worker died."""


def run(node: str, op: str, **request: Any) -> Any:
    """The result of `op` ("search", "extract", "sub": see regex_worker) for the node class `node`.

    Raises re.error as `re` would, TextTooLong past the text limit, RegexStopped past the time or
    memory limit, InterruptProcessingException when the prompt is interrupted.
    """
    frame = json.dumps({"op": op, "max_chars": max_text_chars(), "seconds": SECONDS, **request}).encode("ascii")
    worker = _take()
    try:
        reply = _exchange(worker, frame, node)
    except BaseException:
        _kill(worker)
        raise
    if "failed" in reply:
        _kill(worker)  # after a MemoryError its heap may be a mess: start afresh next time
    else:
        _keep(worker)
    return _result(node, reply)


def _result(node: str, reply: dict) -> Any:
    if "value" in reply:
        return reply["value"]
    if "re_error" in reply:
        raise re.error(*reply["re_error"])
    if "too_long" in reply:
        check_length(node, reply["too_long"], at_least=True)
    kind, message = reply["failed"]
    if kind == "MemoryError":
        raise RegexStopped(
            f"{node}: the regular expression needed more than {MEMORY_BYTES >> 20} MiB of memory and was stopped"
        )
    error = getattr(builtins, kind, None)
    if isinstance(error, type) and issubclass(error, Exception):
        raise error(message)  # TypeError for a non-text input, as `re` raises it
    raise RegexStopped(f"{node}: {kind}: {message}")


def _exchange(worker: subprocess.Popen, frame: bytes, node: str) -> dict:
    worker.stdin.write(len(frame).to_bytes(4, "big") + frame)
    worker.stdin.flush()
    deadline = time.monotonic() + SECONDS
    out = worker.stdout
    # select() waits without the GIL: the server's threads run while the worker matches.
    while not select.select([out], [], [], POLL_S)[0]:
        progress.throw_if_interrupted()
        if time.monotonic() > deadline:
            raise RegexStopped(
                f"{node}: the regular expression ran longer than {SECONDS:g} s and was stopped "
                "(nested repetition such as (a+)+ makes matching time grow exponentially)"
            )
    header = out.read(4)
    if len(header) < 4:
        raise RegexStopped(f"{node}: the regular-expression process ended unexpectedly (exit code {worker.wait()})")
    return json.loads(out.read(int.from_bytes(header, "big")))


def _take() -> subprocess.Popen:
    with _lock:
        while _idle:
            worker = _idle.pop()
            if worker.poll() is None:
                return worker
    return subprocess.Popen(
        [sys.executable, "-I", "-S", str(WORKER), str(MEMORY_BYTES)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )


def _keep(worker: subprocess.Popen) -> None:
    with _lock:
        if len(_idle) < MAX_IDLE:
            _idle.append(worker)
            return
    _kill(worker)


def _kill(worker: subprocess.Popen) -> None:
    worker.kill()
    worker.wait()
    for pipe in (worker.stdin, worker.stdout):
        with contextlib.suppress(OSError):  # a write cut short leaves bytes that can no longer go
            pipe.close()


@atexit.register
def _close_idle() -> None:
    with _lock:
        workers, _idle[:] = list(_idle), []
    for worker in workers:
        _kill(worker)
