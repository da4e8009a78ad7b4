"""The web UI's "Text to Image to Video" template (workflows_json/txt_to_image_to_video.json, written by
scripts/svd_workflow.py: the template's graph with sdxl-tiny and svd_xt-tiny, fixed seeds, 96 x 64 pixels, 5 frames,
3 steps per sampler) from a fresh, empty workspace: the SDXL image (its PreviewImage) and the video's frames (a
SaveImage of the video's VAEDecode beside the template's CreateVideo and SaveVideo) are the same with the default
executors and with `--executors 0`; the image is the one the recording started from, and the frames are within
1/255 of ComfyUI 0.3.64's video half run on it (tests/models/fixtures/comfyui_svd_workflow.json.xz, recorded by
scripts/record_comfyui_svd.py). ComfyUI does not run the image half: sdxl-tiny's byte-vocabulary text encoders have
no ComfyUI counterpart."""

from __future__ import annotations

import io
import json
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import numpy as np
from PIL import Image

from scripts.svd_workflow import NAME, SUBSTITUTE, image_node
from scripts.workflow_files import tiny_template_ui
from tests.e2e.served import REPO, assert_within_1_of_255_of_record, serving
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_svd_workflow.json")
FRAMES_NODE = "900"


def _get(url: str) -> bytes:
    return urllib.request.urlopen(url, timeout=30).read()


def _with_frames(prompt: dict) -> dict:
    (decode,) = [
        k
        for k, v in prompt.items()
        if v["class_type"] == "VAEDecode" and prompt[v["inputs"]["vae"][0]]["class_type"] == "ImageOnlyCheckpointLoader"
    ]
    frames = {"class_type": "SaveImage", "inputs": {"images": [decode, 0], "filename_prefix": "svd_frames"}}
    return {**prompt, FRAMES_NODE: frames}


def _outputs(workspace: Path, log_path: Path, prompt: dict, *flags: str) -> dict[str, np.ndarray]:
    """Each image output node's images, stacked, from one run on a server started with these flags."""
    with serving(workspace, log_path, *flags) as base:
        body = json.dumps({"prompt": prompt, "client_id": str(uuid.uuid4())}).encode()
        pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())
        deadline = time.time() + 900
        while True:
            entry = json.loads(_get(f"{base}/history/{pid['prompt_id']}")).get(pid["prompt_id"])
            if entry is not None:
                assert entry["status"]["status_str"] != "error", entry["status"]["messages"]
                if entry["status"]["completed"]:
                    break
            assert time.time() < deadline, "not finished within 900 s"
            time.sleep(0.5)
        return {
            node: np.stack(
                [
                    np.asarray(Image.open(io.BytesIO(_get(f"{base}/view?" + urllib.parse.urlencode(im)))))
                    for im in images
                ]
            )
            for node, out in entry["outputs"].items()
            if (images := [im for im in out.get("images", []) if im["filename"].endswith(".png")])
        }


def test_shipped_ui_workflow_is_the_templates_graph() -> None:
    ui = json.loads((REPO / "workflows_json" / f"{NAME}.ui.json").read_text())
    assert ui == tiny_template_ui(NAME, SUBSTITUTE)


def test_template_renders_the_same_in_both_modes_and_as_comfyui(tmp_path) -> None:
    prompt = _with_frames(json.loads((REPO / "workflows_json" / f"{NAME}.json").read_text()))
    (preview,) = [k for k, v in prompt.items() if v["class_type"] == "PreviewImage"]
    assert prompt[preview]["inputs"]["images"][0] == image_node(prompt)
    workspace = tmp_path / "fresh"
    default = _outputs(workspace, tmp_path / "default.log", prompt)
    other = _outputs(workspace, tmp_path / "executors0.log", prompt, "--executors", "0")
    frames, image = default[FRAMES_NODE], default[preview]
    assert frames.shape == (5, 64, 96, 3) and frames.std() > 0
    assert np.array_equal(frames, other[FRAMES_NODE]), "frames differ between the executor modes"
    assert np.array_equal(image, other[preview]), "the SDXL image differs between the executor modes"
    # the image ComfyUI's video half started from is ours (as PreviewImage writes it)
    # (recorded on another CPU: float32 rounding may move a few values by one level)
    started = np.clip(255.0 * tensor(FIXTURE["init_image"]).numpy(), 0, 255).astype(np.uint8)
    apart = np.abs(image.astype(int) - started.astype(int))
    assert apart.max() <= 1 and (apart > 0).mean() < 0.01, f"{int((apart > 0).sum())} values apart, max {apart.max()}"
    recorded = FIXTURE["workflow"]["pngs_rgb"]
    assert len(recorded) == len(frames)
    for i, (ours, theirs) in enumerate(zip(frames, recorded, strict=True)):
        assert_within_1_of_255_of_record(ours, theirs, f"ComfyUI 0.3.64's frame {i}")
