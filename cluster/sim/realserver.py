"""A real `comfy-cluster serve` for the real-system check: start it, time workflows alone, replay a trace.

The server runs as a subprocess (its own session, so its executors go with it) on a free loopback
port over a temporary workspace, where it builds the demo models on first start. Requests go over
HTTP as any client sends them: POST /prompt with the tenant in extra_data, then GET /history/{id}.
Latency is taken from the server's own `execution_success` timestamp (wall clock, same machine), so
the polling interval does not add to it; service is `execution_start` to `execution_success`.
Every request gets fresh seeds so no output is served from a cache.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cluster.bench import free_port
from cluster.sim.traces import TraceRequest

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS_DIR = REPO / "workflows_json"
SEED_INPUTS = ("seed", "noise_seed")


def demo_prompts(names: Sequence[str]) -> dict[str, dict]:
    """API-format prompts of workflows_json/<name>.json."""
    out = {}
    for name in names:
        path = WORKFLOWS_DIR / f"{name}.json"
        if not path.is_file():
            known = sorted(p.stem for p in WORKFLOWS_DIR.glob("*.json") if not p.stem.endswith(".ui"))
            raise ValueError(f"no workflow {name!r} in {WORKFLOWS_DIR}; known: {known}")
        out[name] = json.loads(path.read_text())
    return out


def reseed(prompt: dict, rng: np.random.Generator) -> dict:
    """A copy with every seed input replaced (identical prompts would be answered from the cache)."""
    out = json.loads(json.dumps(prompt))
    for node in out.values():
        for key in SEED_INPUTS:
            if isinstance(node.get("inputs", {}).get(key), int):
                node["inputs"][key] = int(rng.integers(1 << 31))
    return out


class RealServer:
    """`comfy-cluster serve --executors N --concurrent-prompts P` as a subprocess; a context manager."""

    def __init__(
        self,
        executors: int = 2,
        threads: int = 1,
        workspace: str | Path | None = None,
        cache: str = "none",
        start_timeout_s: float = 240.0,
        concurrent_prompts: int = 1,
    ) -> None:
        self.executors, self.threads, self.cache = executors, threads, cache
        self.concurrent_prompts = concurrent_prompts
        self.start_timeout_s = start_timeout_s
        self._tmp = tempfile.TemporaryDirectory(prefix="realcheck-") if workspace is None else None
        self.workspace = Path(workspace) if workspace is not None else Path(self._tmp.name) / "ws"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.workspace.parent / f"serve-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> RealServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self.workspace.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-c",
            "import sys; from comfy_bridge.cli import main; sys.exit(main())",
            "serve",
            "--workspace",
            str(self.workspace),
            "--listen",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--executors",
            str(self.executors),
            "--executor-threads",
            str(self.threads),
            "--concurrent-prompts",
            str(self.concurrent_prompts),
        ]
        if self.cache == "none":
            cmd.append("--cache-none")  # every prompt computes every node: replay runs what solo timed
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                urllib.request.urlopen(self.url + "/system_stats", timeout=2).read()
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"serve did not answer within {self.start_timeout_s:g} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc is not None:
            try:  # its executors share the session we started it in
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    # -- HTTP ------------------------------------------------------------------------------------

    def submit(self, prompt: dict, tenant: str) -> str:
        body = json.dumps(
            {"prompt": prompt, "client_id": f"realcheck-{tenant}", "extra_data": {"tenant": tenant}}
        ).encode()
        req = urllib.request.Request(self.url + "/prompt", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.load(r)["prompt_id"]

    def history(self, prompt_id: str) -> dict | None:
        with urllib.request.urlopen(f"{self.url}/history/{prompt_id}", timeout=30) as r:
            return json.load(r).get(prompt_id)

    def recent_history(self, n: int) -> dict[str, dict]:
        """The newest `n` history entries (one request however many prompts are pending)."""
        with urllib.request.urlopen(f"{self.url}/history?max_items={max(1, n)}", timeout=30) as r:
            return json.load(r)


@dataclass(frozen=True)
class RealRecord:
    arrival: float  # seconds from the start of the replay
    tenant: str
    workflow: str
    finish: float | None  # None: failed, or unfinished when the replay stopped waiting
    service_s: float  # execution_start -> execution_success on the server
    ok: bool

    @property
    def latency(self) -> float | None:
        return None if self.finish is None else self.finish - self.arrival


def _timestamps(entry: dict) -> tuple[float | None, float | None, bool]:
    """(start, end, success) in seconds since the epoch from a history entry's status messages."""
    start = end = None
    for kind, data in entry.get("status", {}).get("messages", []):
        if kind == "execution_start":
            start = data["timestamp"] / 1e3
        elif kind in ("execution_success", "execution_error", "execution_interrupted"):
            end = data["timestamp"] / 1e3
    return start, end, entry.get("status", {}).get("status_str") == "success"


def _error(entry: dict) -> str:
    for kind, data in entry.get("status", {}).get("messages", []):
        if kind == "execution_error":
            return f"{data.get('node_type')}: {data.get('exception_message', '').strip()}"
    return str(entry.get("status"))


@dataclass(frozen=True)
class SoloTiming:
    """One workflow alone on the server, medians over the repetitions."""

    admit_s: float  # submission to execution_start: HTTP, validation, the worker picking it up
    service_s: float  # execution_start to execution_success: what the executors and the orchestrator do

    @property
    def latency_s(self) -> float:
        return self.admit_s + self.service_s


def run_alone(
    server: RealServer, prompt: dict, rng: np.random.Generator, timeout_s: float = 300.0, poll_s: float = 0.25
) -> tuple[float, float]:
    """(admission, service) seconds of one run with nothing else in the system, from the server's
    timestamps. Polls as sparsely as `replay` does, so the client loads the machine the same way."""
    t0 = time.time()
    pid = server.submit(reseed(prompt, rng), "solo")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(poll_s)
        entry = server.history(pid)
        if entry is not None:
            start, end, ok = _timestamps(entry)
            if not ok or end is None or start is None:
                raise RuntimeError(f"run failed: {_error(entry)}")
            return max(0.0, start - t0), end - start
    raise TimeoutError(f"solo run did not finish within {timeout_s:g} s")


def measure_solo(
    server: RealServer, prompts: dict[str, dict], repeats: int = 3, seed: int = 0
) -> tuple[dict[str, SoloTiming], dict[str, str]]:
    """Median admission and service time of each workflow run alone, and the workflows that failed
    (with the error). One discarded warm-up each first (weights load, kernels warm), then rounds over
    all workflows, so a run never follows itself (as in a mixed trace)."""
    rng = np.random.default_rng(seed)
    failed: dict[str, str] = {}
    for name, prompt in prompts.items():
        try:
            run_alone(server, prompt, rng)
        except RuntimeError as err:
            failed[name] = str(err)[:500]
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in prompts if name not in failed}
    for _ in range(repeats):
        for name in runs:
            runs[name].append(run_alone(server, prompts[name], rng))
    return {
        name: SoloTiming(statistics.median(a for a, _ in rs), statistics.median(s for _, s in rs))
        for name, rs in runs.items()
    }, failed


def replay(
    server: RealServer,
    prompts: dict[str, dict],
    trace: Sequence[TraceRequest],
    seed: int = 0,
    drain_timeout_s: float = 120.0,
    poll_s: float = 0.25,
) -> list[RealRecord]:
    """Submit each request at its trace time (a thread, so slow polls never delay arrivals) and
    collect the results; requests unfinished `drain_timeout_s` after the last arrival count as
    unfinished. Polling is sparse and reads the newest entries in one request: the client shares the
    machine with the server, and latency comes from the server's timestamps anyway. Only this client
    uses the server, so whatever finished since the last poll is among the newest `pending` entries."""
    rng = np.random.default_rng(seed)
    bodies = [reseed(prompts[r.workflow], rng) for r in trace]
    submitted: dict[int, tuple[str, float]] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()
    t0 = time.time()

    def submitter() -> None:
        try:
            for i, (r, body) in enumerate(zip(trace, bodies)):
                delay = t0 + r.time - time.time()
                if delay > 0:
                    time.sleep(delay)
                sent = time.time()
                pid = server.submit(body, r.tenant)
                with lock:
                    submitted[i] = (pid, sent - t0)
        except BaseException as err:  # reported by the caller's thread
            errors.append(err)

    thread = threading.Thread(target=submitter, name="realcheck-submit", daemon=True)
    thread.start()
    done: dict[int, RealRecord] = {}
    last = max((r.time for r in trace), default=0.0)
    while len(done) < len(trace):
        if errors:
            raise RuntimeError(f"submitting failed: {errors[0]!r}")
        if time.time() - t0 > last + drain_timeout_s:
            break
        with lock:
            pending = [(i, pid, at) for i, (pid, at) in submitted.items() if i not in done]
        recent = server.recent_history(len(pending)) if pending else {}
        for i, pid, at in pending:
            entry = recent.get(pid)
            if entry is None:
                continue
            start, end, ok = _timestamps(entry)
            r = trace[i]
            service = end - start if start is not None and end is not None else 0.0
            done[i] = RealRecord(at, r.tenant, r.workflow, end - t0 if ok and end is not None else None, service, ok)
        time.sleep(poll_s)
    thread.join(timeout=1.0)
    out = []
    for i, r in enumerate(trace):
        if i in done:
            out.append(done[i])
        else:
            at = submitted.get(i, (None, r.time))[1]
            out.append(RealRecord(at, r.tenant, r.workflow, None, 0.0, False))
    return out
