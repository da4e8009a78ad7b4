"""`comfy-cluster serve --executors 2` runs every shipped workflow through two executor processes, and
the images are bit-identical to the in-process run (one torch thread everywhere)."""

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

REPO = Path(__file__).resolve().parents[2]
# A known defect, open (issue 38): zimage_fun_controlnet's image differs by 1581 values between two one-thread
# executors and the in-process run, while the default executor and `--executors 0` agree within 1/255 (its own
# e2e test). Not a batch effect (CFG 1: no split, no batch); its control image's VAE encoding was seen to differ
# between the modes, cause not yet found. (pixeldit_t2i and wan_animate2 differed too until their networks were
# made batch-invariant: PixelDiT's one-row modulations and Wan's Conv3d patch embedding, nodes.models.
# batch_invariant.) strict: the mark fails as soon as it is fixed.
NOT_YET_IDENTICAL = {"zimage_fun_controlnet"}
# A known defect, open (issue 41): on a CPU with AVX-512 (seen on a Xeon with AVX-512 and AMX; these passed on the
# AVX2 machines before), the two LTX image-to-video workflows differ by about 45 values between two one-thread
# executors and the in-process run. Not MKL (strict reproducibility is on, cluster/__init__.py), not ATen's or
# oneDNN's instruction set (pinning either to AVX2 did not change it); cause not yet found. strict: the mark fails as
# soon as it is fixed there; elsewhere the workflows must match.
AVX512 = Path("/proc/cpuinfo").exists() and " avx512f" in Path("/proc/cpuinfo").read_text()
NOT_YET_IDENTICAL_ON_AVX512 = {"ltxv_image_to_video", "ltx2_5_i2v"}


def _param(path: Path):
    if path.stem in NOT_YET_IDENTICAL:
        return pytest.param(
            path, marks=pytest.mark.xfail(strict=True, reason="images differ between the modes (NOT_YET_IDENTICAL)")
        )
    if path.stem in NOT_YET_IDENTICAL_ON_AVX512:
        reason = "images differ between the modes on AVX-512 CPUs (NOT_YET_IDENTICAL_ON_AVX512)"
        return pytest.param(path, marks=pytest.mark.xfail(AVX512, strict=True, reason=reason))
    return path


WORKFLOWS = [
    _param(p) for p in sorted(p for p in (REPO / "workflows_json").glob("*.json") if not p.name.endswith(".ui.json"))
]


def _get(url: str) -> bytes:
    return urllib.request.urlopen(url, timeout=30).read()


@pytest.fixture(scope="module")
def cluster_server(serve):
    return serve("--executors", "2", "--executor-threads", "1")


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
def test_two_executors_give_the_in_process_images(cluster_server, demo_workspace, workflow, fixed_threads):
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    prompt = json.loads(workflow.read_text())
    remote = _run_on_server(cluster_server, prompt)
    local = [
        frame
        for f in asyncio.run(run_prompt(prompt, None, build_registry(demo_workspace), show_progress=False))
        for frame in _decoded(str(f), f.name)
    ]
    assert len(remote) == len(local) > 0
    # a workflow with several outputs (the Wan Animate 2 template's two videos) lists them in another order in
    # the server's history than in-process: compare the frames in one order
    remote, local = (sorted(frames, key=lambda a: (a.shape, a.tobytes())) for frames in (remote, local))
    for a, b in zip(remote, local):
        assert a.shape == b.shape
        assert np.array_equal(a, b), f"{int((a != b).sum())} differing values"
