"""Mage-Flow's shipped workflows (scripts/mage_flow_workflow.py on the tiny files of nodes/models/mage_flow_demo.py):
mage_flow_turbo_t2i (the Turbo text-to-image template: ResolutionSelector, TextEncodeMageFlowEdit without pictures,
4 euler/simple steps at cfg 1, SaveImageAdvanced) and mage_flow_edit (the Mage-Flow-Edit template: example.png
scaled by ImageScaleToTotalPixels with resolution_steps 16, the template's switches, TextEncodeMageFlowEdit with the
picture and the VAE, 30 steps at cfg 5). From a fresh, empty workspace (serve builds the demo files on its first
start) each image is the same with the default executors and with `--executors 0`, and within 1/255 of today's
ComfyUI's Mage-Flow code run on the same graph and files (recorded by scripts/record_comfyui_mage_flow.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts.mage_flow_workflow import WORKFLOWS, tiny_template
from tests.e2e.served import assert_within_1_of_255_of_record, render_in_both_modes
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_mage_flow.json")["workflows"]


@pytest.mark.parametrize("name", sorted(WORKFLOWS))
def test_shipped_workflows_are_the_scripts_graph_and_the_recorded_one(name) -> None:
    shipped = REPO / "workflows_json" / name
    assert json.loads(shipped.with_suffix(".ui.json").read_text()) == tiny_template(WORKFLOWS[name])
    assert RECORDED[name]["prompt"] == json.loads(shipped.with_suffix(".json").read_text())


@pytest.mark.parametrize("name,shape", [("mage_flow_turbo_t2i", (320, 320, 3)), ("mage_flow_edit", (144, 144, 3))])
def test_workflow_in_both_executor_modes_equals_comfyuis(tmp_path, name, shape) -> None:
    prompt = json.loads((REPO / "workflows_json" / f"{name}.json").read_text())
    image = render_in_both_modes(tmp_path, prompt)
    assert image.shape == shape and image.std() > 0
    (png,) = RECORDED[name]["pngs_rgb"]
    assert_within_1_of_255_of_record(image, png)
