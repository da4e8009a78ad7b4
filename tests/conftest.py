"""Shared fixtures: one workspace with the demo models per test session."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import cluster  # noqa: F401 (before torch's first GEMM: it sets MKL's strict numerical reproducibility)

# isort: split
import torch

from cluster.bench import free_port

if TYPE_CHECKING:
    from nodes.workspace import Workspace

REPO = Path(__file__).resolve().parents[1]

# scripts/run_comfyui_execution_tests.sh links ComfyUI's suite in here while it runs; it is not ours to collect.
collect_ignore = ["execution"]

# Inductor's compile cache is shared by every process of a user; an entry half-written by a killed run
# aborts the next compile ("Fatal Python error: Aborted"). Each test session compiles into its own.
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    _inductor_cache = tempfile.mkdtemp(prefix="comfy-cluster-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _inductor_cache


def pytest_unconfigure(config):
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR") == globals().get("_inductor_cache"):
        shutil.rmtree(_inductor_cache, ignore_errors=True)


@pytest.fixture(autouse=True)
def bench_results_elsewhere(tmp_path_factory, monkeypatch):
    """Benches run by tests write their result files to a temporary folder, never over docs/benchmarks/."""
    monkeypatch.setenv("COMFY_CLUSTER_RESULTS", str(tmp_path_factory.mktemp("bench-results")))


@pytest.fixture(scope="session")
def demo_workspace(tmp_path_factory) -> Workspace:
    """A workspace with the demo models and the example input image, built once per session."""
    from comfy_bridge.cli.demo_models import ensure_demo_models
    from nodes.workspace import Workspace, activate
    from tests.demo_models_once import seed_demo_models

    root = Path(os.environ.get("COMFY_CLUSTER_TEST_WORKSPACE") or tmp_path_factory.mktemp("workspace"))
    ws = activate(Workspace(root).create())
    seed_demo_models(root)  # the session's one build, which the e2e tests' fresh workspaces share
    ensure_demo_models(ws)
    return ws


@pytest.fixture(scope="module", autouse=True)
def _demo_workspace_active_for_module(request):
    """A module whose tests use the demo workspace finds it active in its module-scoped fixtures too (they are
    set up before any test's own fixtures, so after an earlier module left another workspace active)."""
    from nodes import workspace as ws_module

    if any(
        getattr(item, "module", None) is request.module and "demo_workspace" in item.fixturenames
        for item in request.session.items
    ):
        ws_module.activate(request.getfixturevalue("demo_workspace"))


@pytest.fixture(autouse=True)
def _demo_workspace_active(request):
    """A test that asks for the demo workspace finds it active, whatever workspace an earlier test left active
    (the fixture is per session; activation is process state)."""
    from nodes import workspace as ws_module

    if "demo_workspace" in request.fixturenames:
        ws_module.activate(request.getfixturevalue("demo_workspace"))
    previous = ws_module._active
    tmp = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    # A workspace a test made in its own tmp_path and left active is gone with the test: put back the one before
    # (a module's fixtures and later module-scoped fixtures would otherwise read a deleted folder).
    current = ws_module._active
    if current is not previous and current is not None and tmp is not None and Path(current.root).is_relative_to(tmp):
        ws_module._active = previous


@pytest.fixture
def fixed_threads():
    """Bit-for-bit comparisons need one torch thread count."""
    from cluster.local import set_threads

    before = torch.get_num_threads()
    set_threads(1)  # in-process ModelFns run on their own thread, which keeps its own count
    yield
    set_threads(before)


@pytest.fixture(scope="module")
def serve(tmp_path_factory, demo_workspace):
    """A factory that starts `comfy-cluster serve` on the demo workspace with extra flags and returns its
    base URL once it answers; every server is stopped when the module's tests are done."""
    import subprocess
    import sys
    import time
    import urllib.request

    procs = []

    def start(*flags: str) -> str:
        port = free_port()
        log_path = tmp_path_factory.mktemp("serve") / "server.log"
        log = open(log_path, "w")
        # Each server keeps its own queue and history: two servers on one state store would take each
        # other's queued prompts while each answers from its own in-memory view of the queue.
        own_store = () if "--state-db" in flags else ("--state-db", str(log_path.parent / "state.sqlite3"))
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "comfy_bridge.cli",
                "serve",
                "--workspace",
                str(demo_workspace.root),
                "--port",
                str(port),
                *own_store,
                *flags,
            ],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        procs.append((proc, log))
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(base + "/system_stats", timeout=2).read()
                return base
            except OSError as err:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError("server did not start:\n" + log_path.read_text()) from err
                time.sleep(0.3)

    yield start
    for proc, log in procs:
        stop_process(proc, 20)
        log.close()


def stop_process(proc, timeout: float = 60) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout` seconds."""
    import subprocess

    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
