"""The web UI's SeedVR2 3B and 7B image upscale templates (workflows_json/seedvr2_3b_upscale_image.json and
seedvr2_7b_upscale_image.json, written by scripts/seedvr2_workflow.py from utility_seedvr2_{3b,7b}_int8_upscale_image
on the tiny files a fresh workspace's demo-models writes): example.png through ResizeImageMaskNode, SeedVR2Preprocess,
the tiny VAE's tiled encode, SeedVR2Conditioning on the tiny transformer, KSampler's one euler step, the tiled decode and SeedVR2PostProcessing.
The image is the same with the default executors and with `--executors 0`, and within 1/255 of what today's ComfyUI's
own code (nodes_seedvr.py, vae.py, model.py, the flow sampling at shift 1) makes of the same graph on the same files
(recorded by scripts/record_comfyui_seedvr2_dit.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.served import assert_within_1_of_255_of_record, render_in_both_modes
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_seedvr2_dit.json.xz")["workflows"]
NAMES = sorted(RECORDED)


def workflow(name: str) -> dict:
    return json.loads((REPO / "workflows_json" / f"{name}.json").read_text())


@pytest.mark.parametrize("name", NAMES)
def test_the_workflow_is_the_recorded_graph(name: str) -> None:
    recorded = RECORDED[name]
    nodes = {v["class_type"]: v["inputs"] for v in workflow(name).values()}
    assert nodes["UNETLoader"]["unet_name"] == f"seedvr2_{name.split('_')[1]}_tiny.safetensors"
    assert nodes["KSampler"]["seed"] == recorded["seed"] and nodes["KSampler"]["steps"] == 1
    assert nodes["VAEEncodeTiled"]["tile_size"] == recorded["tile"] == nodes["VAEDecodeTiled"]["tile_size"]
    assert nodes["VAEEncodeTiled"]["overlap"] == recorded["overlap"]
    assert nodes["SeedVR2PostProcessing"]["color_correction_method"] == "none"


@pytest.mark.parametrize("name", NAMES)
def test_seedvr2_upscale_template_in_both_executor_modes_equals_comfyuis(tmp_path, name: str) -> None:
    image = render_in_both_modes(tmp_path, workflow(name))
    assert image.shape == (128, 128, 3) and image.std() > 0
    assert_within_1_of_255_of_record(image, RECORDED[name]["image"])
