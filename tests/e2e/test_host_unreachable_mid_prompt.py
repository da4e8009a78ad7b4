"""A host that becomes unreachable mid-prompt (its network link goes down, its executor still running there):
the head stops hearing its heartbeats, counts it lost, re-runs what it held on the executor that is left (the
lost outputs included, by lineage), and the prompt finishes with its in-process image."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest

from tests.conftest import REPO
from tests.e2e.other_host import OtherHost
from tests.e2e.test_samplers_on_executors import render_in_process, render_on_server

pytestmark = pytest.mark.skipif(
    OtherHost.unavailable() is not None, reason=f"no other host can be made here: {OtherHost.unavailable()}"
)


def _stats(base: str) -> dict:
    return json.loads(urllib.request.urlopen(base + "/cluster/stats", timeout=10).read())


def _prompt(seed: int, steps: int) -> dict:
    p = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    p["3"]["inputs"].update(seed=seed, steps=steps)
    return p


def _wait_for_executors(base: str, n: int, procs: list, logs: list) -> None:
    deadline = time.time() + 120
    while len(_stats(base)["executors"]) < n:
        assert time.time() < deadline and all(p.poll() is None for p in procs), "\n".join(
            log.read_text() for log in logs
        )
        time.sleep(0.3)


def test_a_prompt_finishes_with_its_image_when_a_host_becomes_unreachable(
    serve, demo_workspace, tmp_path, fixed_threads
):
    env = {k: v for k, v in os.environ.items() if k != "COMFY_CLUSTER_SECRET"}
    executor = ["-m", "comfy_bridge.cli", "executor", "--threads", "1"]
    with OtherHost() as other:
        head = f"tcp://{other.peer_ip}:{7000 + os.getpid() % 2000}"
        base = serve("--executors", "0", "--head-address", head, "--insecure-open")
        there = tmp_path / "other-host-workspace"
        shutil.copytree(demo_workspace.root / "models", there / "models", copy_function=os.link)
        shutil.copy(demo_workspace.root / "cluster.secret", there / "cluster.secret")
        other.hide(demo_workspace.root)
        logs = [tmp_path / "remote.log", tmp_path / "survivor.log"]
        procs = [other.python([*executor, "--head", head, "--workspace", str(there)], REPO, logs[0], env)]
        _wait_for_executors(base, 1, procs, logs[:1])
        (remote,) = [e["id"] for e in _stats(base)["executors"]]
        render_on_server(base, {"warm": _prompt(1, 2)})  # the other host now holds the model's weights
        # the survivor joins from the head's host; the warm host keeps the prompt's steps (warm wait)
        procs.append(
            subprocess.Popen(
                [sys.executable, *executor, "--head", head, "--workspace", str(demo_workspace.root)],
                cwd=REPO,
                env=env,
                stdout=open(logs[1], "w"),
                stderr=subprocess.STDOUT,
            )
        )
        try:
            _wait_for_executors(base, 2, procs, logs)
            done_before = next(e["completed"] for e in _stats(base)["executors"] if e["id"] == remote)
            cut: dict = {}

            def cut_the_link_mid_prompt() -> None:
                deadline = time.time() + 120
                while time.time() < deadline:
                    ex = [e for e in _stats(base)["executors"] if e["id"] == remote]
                    if ex and ex[0]["completed"] >= done_before + 5 and ex[0]["running"]:
                        other.cut()
                        cut["at"] = ex[0]["completed"] - done_before
                        return
                    time.sleep(0.02)

            cutter = threading.Thread(target=cut_the_link_mid_prompt)
            cutter.start()
            prompt = {"long": _prompt(7, 60)}
            served = render_on_server(base, prompt)
            cutter.join()
            assert "at" in cut, "the other host ran no step of the prompt"
            stats = _stats(base)
            assert remote not in [e["id"] for e in stats["executors"]] and stats["executors_lost"] >= 1
            print(f"link cut after {cut['at']} invocations on the other host; {stats['reruns']} re-run")
        finally:
            procs[1].terminate()
            procs[1].wait(30)
    assert np.array_equal(served["long"], render_in_process(demo_workspace, prompt)["long"])
