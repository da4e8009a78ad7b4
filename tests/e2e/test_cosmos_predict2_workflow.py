"""The Cosmos Predict2 workflows (workflows_json/cosmos_predict2_2b_t2i.json and _i2v.json, written by
scripts/cosmos_predict2_workflow.py on the tiny demo files): text to image (UNETLoader, CLIPLoader type cosmos on the
old T5-XXL, EmptySD3LatentImage, KSampler, the Wan 2.1 VAE) and Video2World from example.png
(CosmosPredict2ImageToVideoLatent, its last generated frame saved). From a fresh, empty workspace (serve builds the
demo files on its first start) each image is the same with the default executors and with `--executors 0`, and
within 1/255 of ComfyUI 0.3.64's run of the same graph on the same files (scripts/record_comfyui_cosmos_predict2.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts.cosmos_predict2_workflow import WORKFLOWS
from tests.e2e.served import assert_within_1_of_255_of_record, render_in_both_modes
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_cosmos_predict2.json.xz")["workflows"]


@pytest.mark.parametrize("name", sorted(WORKFLOWS))
def test_shipped_workflow_is_the_written_and_recorded_one(name: str) -> None:
    shipped = json.loads((REPO / "workflows_json" / f"{name}.json").read_text())
    assert shipped == WORKFLOWS[name]() == RECORDED[name]["prompt"]


@pytest.mark.parametrize("name", sorted(WORKFLOWS))
def test_workflow_in_both_executor_modes_equals_comfyuis(tmp_path, name: str) -> None:
    prompt = json.loads((REPO / "workflows_json" / f"{name}.json").read_text())
    image = render_in_both_modes(tmp_path, prompt)
    assert image.std() > 0
    (png,) = RECORDED[name]["pngs_rgb"]
    assert_within_1_of_255_of_record(image, png)
