"""The head restarts (an upgrade, a crash and its supervisor) while an executor on another host keeps running
(`comfy-cluster executor`, tests/e2e/other_host.py): the executor waits for it (SIGTERM still ends it), joins the new head within
seconds (answering only the latest of the challenges the new head sends back to its queued heartbeats), with
a fresh arena whose data socket keeps its address, and the next prompt gives the in-process image.
`--exit-with-head` makes it stop with the head instead."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from tests.conftest import REPO, free_port, stop_process
from tests.e2e.other_host import OtherHost
from tests.e2e.test_samplers_on_executors import render_in_process, render_on_server

pytestmark = pytest.mark.skipif(
    OtherHost.unavailable() is not None, reason=f"no other host can be made here: {OtherHost.unavailable()}"
)


def _stats(base: str) -> dict:
    return json.loads(urllib.request.urlopen(base + "/cluster/stats", timeout=10).read())


def _prompt(seed: int) -> dict:
    p = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    p["3"]["inputs"].update(seed=seed, steps=4)
    return p


def _serve(ws, port: int, head: str, log) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "comfy_bridge.cli",
            "serve",
            "--workspace",
            str(ws),
            "--port",
            str(port),
            "--executors",
            "0",
            "--head-address",
            head,
            "--insecure-open",
        ],
        cwd=REPO,
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.time() + 120
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/system_stats", timeout=2).read()
            return proc
        except OSError:
            assert time.time() < deadline and proc.poll() is None, open(log).read()
            time.sleep(0.3)


def _wait_for(predicate, timeout_s: float, what: str) -> float:
    t0 = time.time()
    while not predicate():
        assert time.time() - t0 < timeout_s, what
        time.sleep(0.1)
    return time.time() - t0


@pytest.mark.parametrize("exit_with_head", [False, True], ids=["rejoins", "exit-with-head"])
def test_an_executor_on_another_host_outlives_a_head_restart(exit_with_head, demo_workspace, tmp_path, fixed_threads):
    here, there = tmp_path / "head-workspace", tmp_path / "other-host-workspace"
    for ws in (here, there):
        shutil.copytree(demo_workspace.root / "models", ws / "models", copy_function=os.link)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with OtherHost() as other:
        head = f"tcp://{other.peer_ip}:{free_port()}"
        first = _serve(here, port, head, tmp_path / "serve-1.log")
        try:
            shutil.copy(here / "cluster.secret", there / "cluster.secret")
            other.hide(here)
            env = {k: v for k, v in os.environ.items() if k != "COMFY_CLUSTER_SECRET"}
            argv = ["-m", "comfy_bridge.cli", "executor", "--head", head, "--workspace", str(there), "--threads", "1"]
            executor = other.python(
                argv + (["--exit-with-head"] if exit_with_head else []), REPO, tmp_path / "executor.log", env
            )
            _wait_for(lambda: _stats(base)["executors"], 120, "the executor did not join")
            before = render_on_server(base, {"a": _prompt(1)})["a"]
        finally:
            stop_process(first, 30)
        if exit_with_head:
            _wait_for(lambda: executor.poll() is not None, 30, "the executor did not stop with its head")
            assert executor.returncode == 0
            return
        time.sleep(1.0)  # the executor's heartbeats queue up meanwhile
        assert executor.poll() is None, (tmp_path / "executor.log").read_text()
        second = _serve(here, port, head, tmp_path / "serve-2.log")
        try:
            rejoined_s = _wait_for(lambda: _stats(base)["executors"], 30, "the executor did not join the new head")
            print(f"joined the restarted head {rejoined_s:.1f} s after it answered")
            after = render_on_server(base, {"b": _prompt(2)})["b"]
            assert executor.poll() is None
        finally:
            stop_process(second, 30)
        time.sleep(1.0)  # waiting for a head again: SIGTERM still ends it, at once
        executor.terminate()
        assert executor.wait(20) == 0
    local = render_in_process(demo_workspace, {"a": _prompt(1), "b": _prompt(2)})
    assert np.array_equal(before, local["a"]) and np.array_equal(after, local["b"])
