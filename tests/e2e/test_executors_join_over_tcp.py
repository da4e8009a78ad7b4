"""`serve --head-address tcp://127.0.0.1:P --executors 0` with two `comfy-cluster executor --head ...
--data-plane tcp` processes joining it (as from other machines, on one host) gives the in-process
images (the default workflow and a ControlNet one), and every tensor between the processes went over
their data sockets: no shared-memory pull by the executors or by the server's caller."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from tests.conftest import REPO, free_port
from tests.e2e.test_samplers_on_executors import render_in_process, render_on_server


def _stats(base: str) -> dict:
    return json.loads(urllib.request.urlopen(base + "/cluster/stats", timeout=10).read())


@pytest.fixture(scope="module")
def joined(serve, demo_workspace, tmp_path_factory):
    head = f"tcp://127.0.0.1:{free_port()}"
    base = serve("--executors", "0", "--head-address", head, "--data-plane", "tcp")
    assert (demo_workspace.root / "cluster.secret").exists()  # made by the head, read by the executors
    env = {k: v for k, v in os.environ.items() if k != "COMFY_CLUSTER_SECRET"}
    logs = tmp_path_factory.mktemp("executors")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "comfy_bridge.cli",
                "executor",
                "--head",
                head,
                "--data-plane",
                "tcp",
                "--workspace",
                str(demo_workspace.root),
                "--threads",
                "1",
            ],
            cwd=REPO,
            env=env,
            stdout=open(logs / f"executor-{i}.log", "w"),
            stderr=subprocess.STDOUT,
        )
        for i in range(2)
    ]
    try:
        deadline = time.time() + 120
        while len(_stats(base)["executors"]) < 2:
            assert time.time() < deadline and all(p.poll() is None for p in procs), "\n".join(
                (logs / f"executor-{i}.log").read_text() for i in range(2)
            )
            time.sleep(0.3)
        yield base
    finally:
        for p in procs:
            p.terminate()
            p.wait(30)


def _prompt(workflow: str, seed: int) -> dict:
    p = json.loads((REPO / "workflows_json" / f"{workflow}.json").read_text())
    p["3"]["inputs"].update(seed=seed, steps=4)  # node 3 is the KSampler in both
    return p


def test_joined_executors_give_the_in_process_images_over_tcp(joined, demo_workspace, fixed_threads):
    # two prompts at once, so both executors work; ControlNet's residuals are a callback input, pulled lazily
    prompts = {
        "seed1": _prompt("text_to_image", 1),
        "seed2": _prompt("text_to_image", 2),
        "controlnet": _prompt("controlnet", 3),
    }
    remote = render_on_server(joined, prompts)
    local = render_in_process(demo_workspace, prompts)
    for case in prompts:
        assert np.array_equal(remote[case], local[case]), case
    stats = _stats(joined)
    executors = stats["executors"]
    assert len(executors) == 2 and all(e["completed"] > 0 for e in executors)
    assert all(e["data_address"].startswith("tcp://127.0.0.1:") and e["ip"] == "127.0.0.1" for e in executors)
    assert all(e["pulls"]["shm"] == 0 for e in executors), executors
    assert stats["data_plane"]["caller"]["shm"] == 0, stats["data_plane"]
    assert stats["data_plane"]["mode"] == "tcp"
    assert sum(e["pulls"]["tcp"] for e in executors) > 0 and stats["data_plane"]["caller"]["tcp"] > 0
