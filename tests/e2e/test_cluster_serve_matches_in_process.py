"""`comfy-cluster serve --executors 2` runs every shipped workflow through two executor processes, and
the images are bit-identical to the in-process run (ModelFns on one torch thread in both); the in-process run's
files carry the prompt in ComfyUI's metadata and what it saves is not flat (test_workflows_run.py's check)."""

from __future__ import annotations

import asyncio
import io
import json
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import av
import numpy as np
import pytest
from PIL import Image

from tests.e2e.test_workflows_run import assert_outputs_carry_the_prompt

REPO = Path(__file__).resolve().parents[2]
# (pixeldit_t2i and wan_animate2 differed until their networks were made batch-invariant: PixelDiT's one-row
# modulations and Wan's Conv3d patch embedding, nodes.models.batch_invariant; zimage_fun_controlnet until the
# in-process ModelFns got contiguous tensors as an executor does, cluster.executor.core.DirectIO; the LTX
# image-to-video workflows until node bodies ran with the head's thread count in both modes, cluster.local.)
WORKFLOWS = sorted(p for p in (REPO / "workflows_json").glob("*.json") if not p.name.endswith(".ui.json"))


def _get(url: str) -> bytes:
    return urllib.request.urlopen(url, timeout=30).read()


@pytest.fixture(scope="module")
def cluster_server(serve):
    return serve("--executors", "2", "--executor-threads", "1")


@pytest.fixture
def one_thread_model_fns():
    """In-process as `serve --executors 0 --executor-threads 1` computes: ModelFns on one thread, node bodies
    with the thread count they have in the server's head (torch's default), which some CPU kernels round by."""
    from cluster.local import default_local_runtime

    runtime = default_local_runtime()
    before, runtime.threads = runtime.threads, 1
    yield
    runtime.threads = before


def _run_on_server(base: str, prompt: dict) -> list[np.ndarray]:
    body = json.dumps({"prompt": prompt, "client_id": str(uuid.uuid4())}).encode()
    pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())["prompt_id"]
    deadline = time.time() + 300
    while time.time() < deadline:
        history = json.loads(_get(f"{base}/history/{pid}"))
        if pid in history and history[pid]["status"]["completed"]:
            break
        assert not (pid in history and history[pid]["status"]["status_str"] == "error"), history[pid]["status"]
        time.sleep(0.3)
    else:
        raise TimeoutError(pid)
    images = []
    for out in history[pid]["outputs"].values():
        for im in out.get("images", []):
            data = _get(f"{base}/view?" + urllib.parse.urlencode(im))
            images.extend(_decoded(io.BytesIO(data), im["filename"]))
    return images


def _decoded(source, name: str) -> list[np.ndarray]:
    """An image file's pixels; a video's decoded frames (its bytes differ run to run: container ids)."""
    if not name.endswith(".mp4"):
        return [np.asarray(Image.open(source))]
    with av.open(source) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.stem)
def test_two_executors_give_the_in_process_images(cluster_server, demo_workspace, workflow, one_thread_model_fns):
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    prompt = json.loads(workflow.read_text())
    remote = _run_on_server(cluster_server, prompt)
    files = asyncio.run(run_prompt(prompt, None, build_registry(demo_workspace), show_progress=False))
    assert_outputs_carry_the_prompt(files, prompt, None, demo_workspace.temp_dir)
    local = [frame for f in files for frame in _decoded(str(f), f.name)]
    assert len(remote) == len(local) > 0
    # a workflow with several outputs (the Wan Animate 2 template's two videos) lists them in another order in
    # the server's history than in-process: compare the frames in one order
    remote, local = (sorted(frames, key=lambda a: (a.shape, a.tobytes())) for frames in (remote, local))
    for a, b in zip(remote, local):
        assert a.shape == b.shape
        assert np.array_equal(a, b), f"{int((a != b).sum())} differing values"
