"""`serve --ray ADDRESS` on a Ray cluster of three worker nodes (`ray.cluster_utils.Cluster` on this machine,
each node with its own CPU and treated as its own host, `--ray-nodes-as-hosts`; the Ray head node gives
no CPU, as on KubeRay, so it runs no executor and can never be the node removed): Ray places one executor
actor on every worker node, the default and the ControlNet workflows give the in-process images with tensors crossing
nodes over TCP only (no shared-memory pull by any executor or by the server); an executor process killed
is started again by Ray, a node that joins gets an executor, and a worker node removed while a prompt
samples does not stop it: the head re-runs what that node's executor held on the others and the image is
the same."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest

from tests.conftest import REPO, free_port, stop_process
from tests.e2e.test_samplers_on_executors import render_in_process, render_on_server

ray_cluster_utils = pytest.importorskip("ray.cluster_utils", reason="ray is a test extra")
NODE = {"num_cpus": 1, "object_store_memory": 80 << 20}


def _stats(base: str) -> dict:
    return json.loads(urllib.request.urlopen(base + "/cluster/stats", timeout=10).read())


@pytest.fixture(scope="module")
def ray_nodes():
    cluster = ray_cluster_utils.Cluster(
        initialize_head=True, head_node_args={**NODE, "num_cpus": 0, "include_dashboard": False}
    )
    workers = [cluster.add_node(**NODE) for _ in range(3)]
    try:
        yield cluster, workers
    finally:
        cluster.shutdown()


@pytest.fixture(scope="module")
def ray_served(ray_nodes, demo_workspace, tmp_path_factory):
    cluster, workers = ray_nodes
    port = free_port()
    log_path = tmp_path_factory.mktemp("ray-serve") / "server.log"
    with open(log_path, "w") as log:
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
                "--ray",
                cluster.address,
                "--head-address",
                f"tcp://127.0.0.1:{free_port()}",
                "--ray-nodes-as-hosts",
                "--executor-threads",
                "1",
            ],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 400  # three executors import torch and the model code on two cores
        while True:
            try:
                if len(_stats(base)["executors"]) == 3:
                    break
            except OSError:
                pass
            assert time.time() < deadline and proc.poll() is None, log_path.read_text()[-6000:]
            time.sleep(0.5)
        yield base, cluster, workers, log_path
    finally:
        stop_process(proc)


def _wait_for(base: str, ok, what: str, timeout_s: float = 300) -> list[dict]:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        executors = _stats(base)["executors"]
        if ok(executors):
            return executors
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout_s} s; executors: {_stats(base)['executors']}")


def _prompt(workflow: str, seed: int, steps: int = 4) -> dict:
    p = json.loads((REPO / "workflows_json" / f"{workflow}.json").read_text())
    p["3"]["inputs"].update(seed=seed, steps=steps)  # node 3 is the KSampler in both
    return p


def test_serve_ray_without_an_address_starts_a_local_ray_and_renders(serve, demo_workspace, fixed_threads):
    # the local Ray outlives serve's start-up thread (Ray ties the processes it starts to their thread)
    base = serve("--ray", "--executor-threads", "1")
    executors = _wait_for(base, lambda ex: len(ex) == 1, "the local Ray's executor", timeout_s=200)
    assert executors[0]["host_id"] and executors[0]["data_address"].startswith("tcp://127.0.0.1:")
    time.sleep(12)  # past the moment a local Ray tied to a finished thread went down
    prompts = {"default": _prompt("text_to_image", 5)}
    assert np.array_equal(
        render_on_server(base, prompts)["default"], render_in_process(demo_workspace, prompts)["default"]
    )


def test_ray_places_one_executor_per_node_each_its_own_host(ray_served):
    base, _, _, _ = ray_served
    executors = _stats(base)["executors"]
    assert len({e["host_id"] for e in executors}) == 3, executors
    assert all(e["host_id"].startswith("ray-node-") for e in executors)
    assert all(e["data_address"].startswith("tcp://127.0.0.1:") for e in executors)


def test_workflows_on_ray_nodes_give_the_in_process_images_over_tcp(ray_served, demo_workspace, fixed_threads):
    base, _, _, _ = ray_served
    prompts = {
        "seed1": _prompt("text_to_image", 1),
        "seed2": _prompt("text_to_image", 2),
        "seed3": _prompt("text_to_image", 3),
        "controlnet": _prompt("controlnet", 4),
    }
    on_ray = render_on_server(base, prompts)
    local = render_in_process(demo_workspace, prompts)
    for case in prompts:
        assert np.array_equal(on_ray[case], local[case]), case
    stats = _stats(base)
    executors = stats["executors"]
    assert sum(e["completed"] > 0 for e in executors) >= 2, executors  # the work spread over nodes
    assert all(e["pulls"]["shm"] == 0 for e in executors), executors  # nodes share no memory
    assert stats["data_plane"]["caller"]["shm"] == 0, stats["data_plane"]
    assert sum(e["pulls"]["tcp"] for e in executors) > 0


def test_ray_restarts_an_executor_whose_process_was_killed(ray_served):
    base, _, _, _ = ray_served
    before = _stats(base)["executors"]
    victim = before[0]
    os.kill(victim["pid"], signal.SIGKILL)  # the actor's process: Ray starts it again, it registers anew
    after = _wait_for(
        base,
        lambda ex: len(ex) == 3 and victim["pid"] not in {e["pid"] for e in ex},
        "a restarted executor registering in place of the killed one",
    )
    assert victim["id"] in {e["id"] for e in after}  # the same executor, in a new process
    assert {e["host_id"] for e in after} == {e["host_id"] for e in before}  # again on the same node


def test_a_node_that_joins_gets_an_executor(ray_served):
    base, cluster, workers, _ = ray_served
    workers.append(cluster.add_node(**NODE))
    host = f"ray-node-{workers[-1].node_id[:16]}"
    _wait_for(base, lambda ex: len(ex) == 4 and host in {e["host_id"] for e in ex}, "an executor on the new node")


def test_a_worker_node_removed_mid_prompt_still_gives_the_image(ray_served, demo_workspace, fixed_threads):
    base, cluster, workers, log_path = ray_served
    prompt = {"long": _prompt("text_to_image", 7, steps=60)}
    lost_before, count_before = _stats(base)["executors_lost"], len(_stats(base)["executors"])
    # the node whose executor runs a step of the prompt goes, with its executor and the outputs it held
    victim: dict = {}

    def remove_a_busy_node() -> None:
        deadline = time.time() + 300
        while time.time() < deadline:
            busy = [e for e in _stats(base)["executors"] if e.get("running")]
            node_of = {f"ray-node-{w.node_id[:16]}": w for w in workers}
            hits = [node_of[e["host_id"]] for e in busy if e["host_id"] in node_of]
            if hits:
                victim["node"] = hits[0]
                cluster.remove_node(hits[0])
                return
            time.sleep(0.1)

    remover = threading.Thread(target=remove_a_busy_node)
    remover.start()
    on_ray = render_on_server(base, prompt)
    remover.join()
    assert "node" in victim, "no worker node's executor ran a step of the prompt"
    assert np.array_equal(on_ray["long"], render_in_process(demo_workspace, prompt)["long"])
    stats = _stats(base)
    assert stats["executors_lost"] > lost_before, {k: v for k, v in stats.items() if k != "executors"}
    assert len(stats["executors"]) == count_before - 1, stats["executors"]
