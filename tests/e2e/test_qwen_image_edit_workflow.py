"""The web UI's Qwen-Image-Edit 2509 and 2511 templates. 2509 (workflows_json/qwen_image_edit_2509.json: its node graph unpacked
from the subgraph, the tiny files substituted: FluxKontextImageScale, TextEncodeQwenImageEditPlus with the image
and VAE, the Lightning LoRA chosen by ComfySwitchNode, CFGNorm, ModelSamplingAuraFlow, KSampler from the
VAE-encoded picture, SaveImageAdvanced); 2511 (workflows_json/qwen_image_edit_2511.json: two pictures, the 2511
transformer file, FluxKontextMultiReferenceLatentMethod index_timestep_zero, its switch on the Lightning path).
Each from a fresh, empty workspace: the same image with the default executors and with `--executors 0`, and
ComfyUI's image of the same workflow on the same files to within 1/255 (2509: ComfyUI 0.3.64, recorded by
scripts/record_comfyui_qwen_image_edit.py; 2511: upstream ComfyUI 0.10.0, which 0.3.64 predates, recorded by
scripts/record_comfyui_qwen_image_edit_2511.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.served import assert_within_1_of_255_of_record, render_in_both_modes
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "models" / "fixtures"
# workflow name: the fixture that recorded ComfyUI's run of it
RECORDINGS = {
    "qwen_image_edit_2509": "comfyui_qwen_image_edit.json.xz",
    "qwen_image_edit_2511": "comfyui_qwen_image_edit_2511.json",
}


def recorded(name: str) -> dict:
    return load_json(FIXTURES / RECORDINGS[name])["workflow"]


def workflow(name: str) -> dict:
    return json.loads((REPO / "workflows_json" / f"{name}.json").read_text())


@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_recorded_workflow_is_the_shipped_one(name: str) -> None:
    assert recorded(name)["prompt"] == workflow(name)


@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_template_in_both_executor_modes_equals_comfyuis(tmp_path, name: str) -> None:
    default = render_in_both_modes(tmp_path, workflow(name))
    assert default.shape == (1024, 1024, 3) and default.std() > 0
    (png,) = recorded(name)["pngs_rgb"]
    assert_within_1_of_255_of_record(default, png)
