"""An executor on another host (tests/e2e/other_host.py: its own network namespace behind a veth link, its own
host name, IPC and /dev/shm) joins `serve --head-address` over that link with a workspace of its own at
another path: the default, ControlNet and LoRA workflows give the in-process images, the data plane (left on
`auto`) moved every tensor over TCP because the hosts differ, and the executor found the head's model files
in its own model folders by name, proven by digest, and fetched from the head a file it has no copy of; a
node pack's node runs there from its own copy of the pack, and the files it saves reach the head."""

from __future__ import annotations

import io
import json
import os
import shutil
import time
import urllib.parse
import urllib.request
import uuid

import numpy as np
import pytest
from PIL import Image

from tests.conftest import REPO
from tests.e2e.other_host import OtherHost
from tests.e2e.test_samplers_on_executors import render_in_process, render_on_server

PACK = REPO / "tests" / "packs" / "fixture_packs" / "v1_pack"
pytestmark = pytest.mark.skipif(
    OtherHost.unavailable() is not None, reason=f"no other host can be made here: {OtherHost.unavailable()}"
)


def _stats(base: str) -> dict:
    return json.loads(urllib.request.urlopen(base + "/cluster/stats", timeout=10).read())


def _finished(base: str, pid: str) -> dict:
    deadline = time.time() + 120
    while (entry := json.loads(urllib.request.urlopen(f"{base}/history/{pid}").read()).get(pid)) is None:
        assert time.time() < deadline, f"prompt {pid} did not finish"
        time.sleep(0.2)
    return entry


def _image(base: str, ref: dict) -> np.ndarray:
    data = urllib.request.urlopen(f"{base}/view?" + urllib.parse.urlencode(ref)).read()
    return np.asarray(Image.open(io.BytesIO(data)))


def _prompt(workflow: str, seed: int) -> dict:
    p = json.loads((REPO / "workflows_json" / f"{workflow}.json").read_text())
    p["3"]["inputs"].update(seed=seed, steps=4)  # node 3 is the KSampler in each
    return p


@pytest.fixture(scope="module")
def other_host():
    with OtherHost() as host:
        yield host


def _workspace(root, demo_workspace) -> None:
    """The demo models (linked, not copied) and the v1 fixture pack in a workspace at `root`."""
    shutil.copytree(demo_workspace.root / "models", root / "models", copy_function=os.link)
    shutil.copytree(PACK, root / "custom_nodes" / PACK.name)


@pytest.fixture(scope="module")
def joined(serve, demo_workspace, other_host, tmp_path_factory):
    here = tmp_path_factory.mktemp("head-workspace")
    _workspace(here, demo_workspace)
    shutil.copytree(demo_workspace.root / "input", here / "input")
    port = 7000 + os.getpid() % 2000
    head = f"tcp://{other_host.peer_ip}:{port}"
    base = serve("--workspace", str(here), "--executors", "0", "--head-address", head, "--insecure-open")
    # the other machine's workspace: the same files at another path, and the head's secret
    there = tmp_path_factory.mktemp("other-host-workspace")
    _workspace(there, demo_workspace)
    shutil.copy(here / "cluster.secret", there / "cluster.secret")
    for hidden in (here, demo_workspace.root):  # the head's files are not on the other machine
        other_host.hide(hidden)
    env = {k: v for k, v in os.environ.items() if k != "COMFY_CLUSTER_SECRET"}
    env["COMFY_CLUSTER_MODEL_CACHE"] = str(there / "model-cache")  # what it fetches from the head
    log = there / "executor.log"
    proc = other_host.python(
        ["-m", "comfy_bridge.cli", "executor", "--head", head, "--workspace", str(there), "--threads", "1"],
        REPO,
        log,
        env,
    )
    deadline = time.time() + 120
    while not _stats(base)["executors"]:
        assert time.time() < deadline and proc.poll() is None, log.read_text()
        time.sleep(0.3)
    yield base, here, there


def test_an_executor_on_another_host_gives_the_in_process_images_over_tcp(
    joined, demo_workspace, other_host, fixed_threads
):
    base, here, _ = joined
    prompts = {
        "default": _prompt("text_to_image", 1),
        "controlnet": _prompt("controlnet", 2),
        "lora": _prompt("lora", 3),
    }
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


def test_a_pack_node_runs_on_the_other_host_from_its_own_copy_of_the_pack(joined):
    base, _, _ = joined
    completed = _stats(base)["executors"][0]["completed"]
    prompt = {
        "img": {"class_type": "LoadImage", "inputs": {"image": "example.png"}},
        "inv": {"class_type": "V1Invert", "inputs": {"image": ["img", 0]}},
        "twice": {"class_type": "V1Invert", "inputs": {"image": ["inv", 0]}},
        "a": {"class_type": "SaveImage", "inputs": {"images": ["img", 0], "filename_prefix": "pack_a"}},
        "b": {"class_type": "SaveImage", "inputs": {"images": ["twice", 0], "filename_prefix": "pack_b"}},
    }
    body = json.dumps({"prompt": prompt, "client_id": uuid.uuid4().hex}).encode()
    pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())["prompt_id"]
    entry = _finished(base, pid)
    assert entry["status"]["status_str"] == "success", entry["status"]
    images = {node: _image(base, entry["outputs"][node]["images"][0]) for node in ("a", "b")}
    # inverted twice on the executor: the image again, but for float32's rounding of 1 - (1 - x)
    assert np.abs(images["a"].astype(int) - images["b"].astype(int)).max() <= 1
    assert _stats(base)["executors"][0]["completed"] >= completed + 2


def test_files_a_pack_node_saves_on_the_other_host_are_served_by_the_head(joined):
    base, here, _ = joined
    prompt = {
        "img": {"class_type": "LoadImage", "inputs": {"image": "example.png"}},
        "keep": {"class_type": "V1SaveImage", "inputs": {"image": ["img", 0]}},
        "a": {"class_type": "SaveImage", "inputs": {"images": ["img", 0], "filename_prefix": "pack_save"}},
    }
    body = json.dumps({"prompt": prompt, "client_id": uuid.uuid4().hex}).encode()
    pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())["prompt_id"]
    entry = _finished(base, pid)
    assert entry["status"]["status_str"] == "success", entry["status"]
    (saved,) = entry["outputs"]["keep"]["images"]
    assert saved["subfolder"] == "v1_pack" and (here / "output" / "v1_pack" / saved["filename"]).is_file()
    assert np.array_equal(_image(base, saved), _image(base, entry["outputs"]["a"]["images"][0]))


def test_a_model_file_only_the_head_has_is_fetched_from_it(joined, demo_workspace, fixed_threads):
    base, here, there = joined
    only_here = here / "models" / "loras" / "only-on-the-head.safetensors"  # as a tenant's upload would be
    shutil.copy(here / "models" / "loras" / "sd1-tiny-lora.safetensors", only_here)
    prompt = _prompt("lora", 4)
    prompt["10"]["inputs"]["lora_name"] = only_here.name
    fetched = render_on_server(base, {"lora": prompt})["lora"]
    same = _prompt("lora", 4)  # the same bytes under the name the other host has
    assert np.array_equal(fetched, render_in_process(demo_workspace, {"lora": same})["lora"])
    (copy,) = (there / "model-cache").rglob(only_here.name)  # fetched once, into the other host's cache
    assert copy.read_bytes() == only_here.read_bytes()
