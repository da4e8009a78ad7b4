"""Hunyuan Image 2.1 text-to-image (workflows_json/hunyuan_image_2_1_t2i.json, written by
scripts/hunyuan_image_workflow.py on the tiny files of nodes/models/hunyuan_image_demo.py): UNETLoader, CLIPLoader type
hunyuan_image, CLIPTextEncode for both prompts, EmptyHunyuanImageLatent 128x96, KSampler (4 steps, cfg 3.5, euler,
simple), the 32x VAE, VAEDecode, SaveImage. From a fresh, empty workspace (serve builds the demo files on its first
start) the image is the same with the default executors and with `--executors 0`, and within 1/255 of ComfyUI 0.3.64's
image of the same workflow on the same files (recorded by scripts/record_comfyui_hunyuan_image.py)."""

from __future__ import annotations

import json
from pathlib import Path

from scripts.hunyuan_image_workflow import NAME, ui_graph
from tests.e2e.served import assert_within_1_of_255_of_record, render_in_both_modes
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / NAME
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_hunyuan_image.json")["workflow"]


def test_shipped_workflows_are_the_scripts_graph_and_the_recorded_one() -> None:
    assert json.loads(SHIPPED.with_suffix(".ui.json").read_text()) == ui_graph()
    assert RECORDED["prompt"] == json.loads(SHIPPED.with_suffix(".json").read_text())


def test_workflow_in_both_executor_modes_equals_comfyuis(tmp_path) -> None:
    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    default = render_in_both_modes(tmp_path, prompt)
    assert default.shape == (96, 128, 3) and default.std() > 0
    (png,) = RECORDED["pngs_rgb"]
    assert_within_1_of_255_of_record(default, png)


def test_distilled_workflow_in_both_executor_modes_equals_comfyuis(tmp_path) -> None:
    """The same graph on the guidance-distilled DiT: guidance 6 and the schedule's next sigma reach the model."""
    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    prompt["1"]["inputs"]["unet_name"] = "hunyuanimage2.1_distilled_tiny.safetensors"
    recorded = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_hunyuan_image.json")["distilled_workflow"]
    assert recorded["prompt"] == prompt
    default = render_in_both_modes(tmp_path, prompt)
    assert default.shape == (96, 128, 3) and default.std() > 0
    (png,) = recorded["pngs_rgb"]
    assert_within_1_of_255_of_record(default, png)
