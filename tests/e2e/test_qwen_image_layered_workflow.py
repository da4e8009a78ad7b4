"""The web UI's Qwen-Image-Layered templates (workflows_json/qwen_image_layered.json and
qwen_image_layered_control.json, written by scripts/qwen_image_layered_workflow.py: the "Image to Layers" subgraph
unpacked, the tiny files substituted, 4 steps at 128 pixels): the example picture scaled and VAE-encoded by the
RGBA VAE as both conditionings' reference latent, EmptyQwenImageLayeredLatentImage's 3 frames (composite and 2
layers) denoised by the layered transformer, LatentCut dropping the composite, LatentCutToBatch making each layer
an image, VAEDecode to RGBA, SaveImage writing 2 RGBA PNGs. The control template loads its transformer as
fp8_e4m3fn and prompts "guitar". From a fresh, empty workspace: the same images with the default executors and with
`--executors 0`, and upstream ComfyUI 0.10.0's images of the same workflow on the same files to within 1/255
(0.3.64 has no Qwen-Image-Layered; recorded by scripts/record_comfyui_qwen_image_layered.py)."""

from __future__ import annotations

import io
import json
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.e2e.served import assert_within_1_of_255_of_record, serving

REPO = Path(__file__).resolve().parents[2]
RECORDING = json.loads((REPO / "tests" / "models" / "fixtures" / "comfyui_qwen_image_layered.json").read_text())
NAMES = sorted(RECORDING["workflows"])


def workflow(name: str) -> dict:
    return json.loads((REPO / "workflows_json" / f"{name}.json").read_text())


def rendered_images(base: str, prompt: dict, timeout_s: float = 900) -> list[np.ndarray]:
    """Every image the prompt's SaveImage wrote, as the PNGs' arrays (RGBA here)."""
    body = json.dumps({"prompt": prompt, "client_id": str(uuid.uuid4())}).encode()
    pid = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/prompt", data=body)).read())["prompt_id"]
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        entry = json.loads(urllib.request.urlopen(f"{base}/history/{pid}").read()).get(pid)
        if entry is not None:
            assert entry["status"]["status_str"] != "error", entry["status"]["messages"]
            if entry["status"]["completed"]:
                (out,) = [o for o in entry["outputs"].values() if o.get("images")]
                views = [
                    urllib.request.urlopen(f"{base}/view?" + urllib.parse.urlencode(i)).read() for i in out["images"]
                ]
                return [np.asarray(Image.open(io.BytesIO(v))) for v in views]
        time.sleep(0.2)
    raise AssertionError(f"not finished within {timeout_s} s")


@pytest.mark.parametrize("name", NAMES)
def test_recorded_workflow_is_the_shipped_one(name: str) -> None:
    assert RECORDING["workflows"][name]["prompt"] == workflow(name)


@pytest.mark.parametrize("name", NAMES)
def test_template_in_both_executor_modes_equals_comfyuis(tmp_path, name: str) -> None:
    workspace = tmp_path / "fresh"
    with serving(workspace, tmp_path / "default.log") as base:
        default = rendered_images(base, workflow(name))
    with serving(workspace, tmp_path / "executors0.log", "--executors", "0") as base:
        in_process = rendered_images(base, workflow(name))
    assert [im.shape for im in default] == [(128, 128, 4)] * 2
    for ours, again in zip(default, in_process, strict=True):
        assert np.array_equal(ours, again), f"{int((ours != again).sum())} values differ between the executor modes"
    recorded = RECORDING["workflows"][name]["pngs_rgb"]
    assert len(recorded) == len(default)
    for layer, (ours, png) in enumerate(zip(default, recorded, strict=True)):
        assert ours.std() > 0
        assert_within_1_of_255_of_record(ours, png, f"ComfyUI's layer {layer}")
