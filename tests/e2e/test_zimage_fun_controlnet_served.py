"""The web UI's Z-Image-Turbo Fun Union ControlNet template (workflows_json/zimage_fun_controlnet.json: its own graph
with the subgraph unpacked, on the tiny files, scripts/zimage_fun_controlnet_workflow.py) through `comfy-cluster
serve`, with one executor process (the default) and in-process (`--executors 0`): the same image in both modes, bit
for bit, and not the image of the same graph without the Fun ControlNet (the patch acts inside the executors' denoise
steps). (They differed by up to 54/255 until the in-process VAE encode got its pixels contiguous, as an executor gets
them: Canny's image is a channels-last view, and a conv rounds by memory layout; cluster.executor.core.DirectIO.)
The transformer-level numbers against ComfyUI 0.10.0 are tested in tests/nodes/test_zimage_fun_control.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scripts.zimage_fun_controlnet_workflow import tiny_template
from tests.e2e.test_context_windows_served import _images

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "zimage_fun_controlnet"
PROMPT = json.loads(SHIPPED.with_suffix(".json").read_text())


def test_shipped_workflow_is_the_templates_graph() -> None:
    assert json.loads(SHIPPED.with_suffix(".ui.json").read_text()) == tiny_template()
    assert {n["class_type"] for n in PROMPT.values()} >= {"ModelPatchLoader", "QwenImageDiffsynthControlnet", "Canny"}


def _saved_only(prompt: dict) -> dict:
    """The prompt less its PreviewImage of the canny image, so the server's outputs are SaveImage's."""
    return {k: v for k, v in prompt.items() if v["class_type"] != "PreviewImage"}


def _without_controlnet() -> dict:
    prompt = _saved_only(json.loads(json.dumps(PROMPT)))
    (patched,) = [k for k, v in prompt.items() if v["class_type"] == "QwenImageDiffsynthControlnet"]
    (shift,) = [v for v in prompt.values() if v["class_type"] == "ModelSamplingAuraFlow"]
    assert shift["inputs"]["model"] == [patched, 0]
    shift["inputs"]["model"] = prompt[patched]["inputs"]["model"]  # the plain Z-Image MODEL
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
    differ = int((images["default"] != images["in-process"]).sum())
    assert differ == 0, f"{differ} values differ between the modes"
    plain = {mode: _images(base, _without_controlnet()) for mode, base in servers.items()}
    assert np.array_equal(plain["default"], plain["in-process"])
    assert np.abs(plain["default"].astype(int) - images["default"].astype(int)).max() > 10
