"""The web UI's Qwen-Image DiffSynth ControlNet template (workflows_json/qwen_image_controlnet_patch.json: its own graph
on the tiny files, scripts/qwen_image_controlnet_patch_workflow.py) through `comfy-cluster serve`, with one executor
process (the default) and in-process (`--executors 0`): the same image in both modes, within 1/255 of ComfyUI 0.3.64's
image of the same workflow on the same files (tests/nodes/fixtures/comfyui_qwen_diffsynth.json.xz, recorded by
scripts/record_comfyui_qwen_diffsynth.py), and not the image of the same graph without the ControlNet (the patch acts
inside the executors' denoise steps). The node-level numbers are tested in tests/nodes/test_model_patch.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.e2e.test_context_windows_served import _images
from tests.recorded_tensors import load_json, pixels

REPO = Path(__file__).resolve().parents[2]
PROMPT = json.loads((REPO / "workflows_json" / "qwen_image_controlnet_patch.json").read_text())
RECORDED = load_json(REPO / "tests" / "nodes" / "fixtures" / "comfyui_qwen_diffsynth.json.xz")["workflow"]


def test_recorded_workflow_is_the_shipped_one() -> None:
    assert RECORDED["prompt"] == PROMPT


def _saved_only(prompt: dict) -> dict:
    """The prompt less its PreviewImage of the canny image, so the server's outputs are SaveImage's."""
    return {k: v for k, v in prompt.items() if v["class_type"] != "PreviewImage"}


def _without_controlnet() -> dict:
    prompt = _saved_only(json.loads(json.dumps(PROMPT)))
    prompt["3"]["inputs"]["model"] = ["66", 0]  # KSampler on ModelSamplingAuraFlow's MODEL, not the patched one
    return prompt


@pytest.fixture(scope="module")
def servers(serve):
    # both compute with one torch thread: results differ between thread counts
    return {
        "default": serve("--executor-threads", "1"),
        "in-process": serve("--executors", "0", "--executor-threads", "1"),
    }


def test_the_template_renders_the_same_in_both_modes(servers):
    images = {mode: _images(base, _saved_only(PROMPT)) for mode, base in servers.items()}
    assert images["default"].shape[0] == 1 and images["default"].std() > 0
    assert np.array_equal(images["default"], images["in-process"])
    rec = RECORDED["image_u8"]
    theirs = pixels(rec)
    diff = np.abs(images["default"].astype(int) - theirs.astype(int))
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ from ComfyUI's image by more than 1/255"
    plain = _images(servers["default"], _without_controlnet())
    assert not np.array_equal(plain, images["default"])
