"""An executor on another host (tests/e2e/other_host.py: its own network namespace behind a veth link, its own
host name, IPC and /dev/shm) joins `serve --head-address` over that link with a workspace of its own at
another path: the default, ControlNet and LoRA workflows give the in-process images, the data plane (left on
`auto`) moved every tensor over TCP because the hosts differ, and the executor found the head's model files
in its own model folders by name, proven by digest. A file it lacks fails that prompt by name; the server
keeps serving."""
from __future__ import annotations

import json
import os
import shutil
import time
import urllib.request
import uuid

import numpy as np
import pytest

from tests.conftest import REPO
from tests.e2e.other_host import OtherHost
from tests.e2e.test_samplers_on_executors import render_in_process, render_on_server

pytestmark = pytest.mark.skipif(OtherHost.unavailable() is not None,
                                reason=f"no other host can be made here: {OtherHost.unavailable()}")


def _stats(base: str) -> dict:
    return json.loads(urllib.request.urlopen(base + "/cluster/stats", timeout=10).read())


def _prompt(workflow: str, seed: int) -> dict:
    p = json.loads((REPO / "workflows_json" / f"{workflow}.json").read_text())
    p["3"]["inputs"].update(seed=seed, steps=4)   # node 3 is the KSampler in each
    return p


@pytest.fixture(scope="module")
def other_host():
    with OtherHost() as host:
        yield host


@pytest.fixture(scope="module")
def joined(serve, demo_workspace, other_host, tmp_path_factory):
    port = 7000 + os.getpid() % 2000
    head = f"tcp://{other_host.peer_ip}:{port}"
    base = serve("--executors", "0", "--head-address", head, "--insecure-open")
    # the other machine's workspace: the same model files at another path, and the head's secret
    there = tmp_path_factory.mktemp("other-host-workspace")
    shutil.copytree(demo_workspace.root / "models", there / "models", copy_function=os.link)
    shutil.copy(demo_workspace.root / "cluster.secret", there / "cluster.secret")
    other_host.hide(demo_workspace.root)   # the head's files are not on the other machine
    env = {k: v for k, v in os.environ.items() if k != "COMFY_CLUSTER_SECRET"}
    log = there / "executor.log"
    proc = other_host.python(["-m", "comfy_bridge.cli", "executor", "--head", head, "--workspace", str(there),
                              "--threads", "1"], REPO, log, env)
    deadline = time.time() + 120
    while not _stats(base)["executors"]:
        assert time.time() < deadline and proc.poll() is None, log.read_text()
        time.sleep(0.3)
    yield base, there


def test_an_executor_on_another_host_gives_the_in_process_images_over_tcp(joined, demo_workspace, other_host,
                                                                            fixed_threads):
    base, there = joined
    prompts = {"default": _prompt("text_to_image", 1), "controlnet": _prompt("controlnet", 2),
               "lora": _prompt("lora", 3)}
    remote = render_on_server(base, prompts)
    local = render_in_process(demo_workspace, prompts)
    for case in prompts:
        assert np.array_equal(remote[case], local[case]), case
    stats = _stats(base)
    (executor,) = stats["executors"]
    assert executor["host"] == other_host.name and executor["ip"] == other_host.ip
    assert executor["data_address"].startswith(f"tcp://{other_host.ip}:")
    assert stats["data_plane"]["mode"] == "auto"
    assert executor["pulls"]["shm"] == 0 and executor["pulls"]["tcp"] > 0, executor["pulls"]
    assert stats["data_plane"]["caller"]["shm"] == 0 and stats["data_plane"]["caller"]["tcp"] > 0
    assert not str(demo_workspace.root).startswith(str(there)) and not str(there).startswith(str(demo_workspace.root))


def test_a_model_file_the_other_host_lacks_fails_its_prompt_by_name(joined, demo_workspace):
    base, _ = joined
    only_here = demo_workspace.root / "models" / "loras" / "only-on-the-head.safetensors"
    shutil.copy(demo_workspace.root / "models" / "loras" / "sd1-tiny-lora.safetensors", only_here)
    try:
        prompt = _prompt("lora", 4)
        prompt["10"]["inputs"]["lora_name"] = only_here.name
        body = json.dumps({"prompt": prompt, "client_id": uuid.uuid4().hex}).encode()
        pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())["prompt_id"]
        deadline = time.time() + 120
        while (entry := json.loads(urllib.request.urlopen(f"{base}/history/{pid}").read()).get(pid)) is None:
            assert time.time() < deadline
            time.sleep(0.2)
        assert entry["status"]["status_str"] == "error"
        (error,) = [m[1] for m in entry["status"]["messages"] if m[0] == "execution_error"]
        assert f"model file {only_here} is not on this machine" in error["exception_message"], error
    finally:
        only_here.unlink()
    # the server and its executor keep serving
    assert render_on_server(base, {"after": _prompt("text_to_image", 5)})["after"].shape[-1] == 3
