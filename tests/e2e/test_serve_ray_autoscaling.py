"""`serve --ray auto --ray-autoscale 0:2` on a Ray cluster whose autoscaler starts and stops nodes (Ray's own
fake multi-node provider: real raylets on this machine, launched and removed by the real autoscaler): the
server starts with no executor; a prompt queues, the server asks for an executor, Ray keeps it pending until
the autoscaler adds a node for it, and the prompt renders the in-process image; once the executor has been
idle for the keep-alive it is retired, its node goes idle and the autoscaler removes it: back to zero."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from tests.conftest import REPO, free_port, stop_process
from tests.e2e.test_samplers_on_executors import render_in_process, render_on_server

ray = pytest.importorskip("ray", reason="ray is a test extra")
GCS_PORT = 6379  # the fake provider's nodes join the head at Ray's default port

CONFIG = {  # the cluster config Ray's fake multi-node provider reads (its example, our node type)
    "cluster_name": "comfy-cluster-test",
    "max_workers": 2,
    "provider": {
        "type": "fake_multinode",
        "use_node_id_as_ip": True,
        "disable_node_updaters": True,
        "disable_launch_config_check": True,
    },
    "available_node_types": {
        "ray.head.default": {"resources": {"CPU": 0}, "node_config": {}, "max_workers": 0},
        "cpu_node": {
            "resources": {"CPU": 1, "object_store_memory": 80 << 20},
            "node_config": {},
            "min_workers": 0,
            "max_workers": 2,
        },
    },
    "head_node_type": "ray.head.default",
    "auth": {},
    "upscaling_speed": 1.0,
    "idle_timeout_minutes": 0.1,
    "docker": {},
    "initialization_commands": [],
    "setup_commands": [],
    "head_setup_commands": [],
    "worker_setup_commands": [],
    "head_start_ray_commands": [],
    "worker_start_ray_commands": [],
    "file_mounts": {},
    "cluster_synced_files": [],
    "file_mounts_sync_continuously": False,
    "rsync_exclude": [],
    "rsync_filter": [],
}


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _alive_nodes() -> int:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import ray; ray.init('auto', log_to_driver=False); print(sum(n['Alive'] for n in ray.nodes()))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return int(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def autoscaling_ray(tmp_path_factory):
    assert _port_free(GCS_PORT), f"port {GCS_PORT} is taken: the fake autoscaling cluster needs it"
    config = tmp_path_factory.mktemp("ray") / "autoscaling.json"
    config.write_text(json.dumps(CONFIG))
    env = {**os.environ, "RAY_FAKE_CLUSTER": "1", "AUTOSCALER_UPDATE_INTERVAL_S": "1"}
    ray_cli = shutil.which("ray") or "ray"
    subprocess.run(
        [
            ray_cli,
            "start",
            "--head",
            f"--autoscaling-config={config}",
            "--num-cpus=0",
            f"--port={GCS_PORT}",
            f"--object-store-memory={80 << 20}",
            "--include-dashboard=false",
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    try:
        yield
    finally:
        subprocess.run([ray_cli, "stop", "--force"], capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def served(autoscaling_ray, demo_workspace, tmp_path_factory):
    port = free_port()
    log_path = tmp_path_factory.mktemp("ray-autoscale") / "server.log"
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
                "auto",
                "--head-address",
                f"tcp://127.0.0.1:{free_port()}",
                "--ray-autoscale",
                "0:2",
                "--ray-keepalive",
                "5",
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
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(base + "/system_stats", timeout=5).read()
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, log_path.read_text()[-6000:]
                time.sleep(0.5)
        yield base, log_path
    finally:
        stop_process(proc)


def _executors(base: str) -> list[dict]:
    return json.loads(urllib.request.urlopen(base + "/cluster/stats", timeout=10).read())["executors"]


def test_executors_scale_from_zero_with_the_autoscaler_and_back(served, demo_workspace, fixed_threads):
    base, log_path = served
    assert _executors(base) == [] and _alive_nodes() == 1  # only Ray's head, which gives no CPU
    prompt = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    prompt["3"]["inputs"].update(seed=11, steps=4)
    image = render_on_server(base, {"first": prompt}, timeout_s=400)["first"]
    assert np.array_equal(image, render_in_process(demo_workspace, {"first": prompt})["first"])
    (executor,) = _executors(base)
    assert executor["completed"] > 0 and executor["host_id"].startswith("ray-node-")
    assert "Adding 1 node(s) of type cpu_node" in log_path.read_text()  # the autoscaler made room for it
    deadline = time.time() + 180
    while _executors(base) or _alive_nodes() > 1:  # retired after 5 s idle; its node removed once idle
        assert time.time() < deadline, (_executors(base), _alive_nodes(), log_path.read_text()[-3000:])
        time.sleep(2)
    assert "retiring executor" in log_path.read_text()
