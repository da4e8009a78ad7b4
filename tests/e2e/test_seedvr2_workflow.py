"""The web UI's SeedVR2 3B image upscale template (workflows_json/seedvr2_3b_upscale_image.json, written by
scripts/seedvr2_workflow.py from utility_seedvr2_3b_int8_upscale_image on the tiny files a fresh workspace's
demo-models writes): example.png through ResizeImageMaskNode, SeedVR2Preprocess, the tiny VAE's tiled encode,
SeedVR2Conditioning on the tiny 3B transformer, KSampler's one euler step, the tiled decode and SeedVR2PostProcessing.
The image is the same with the default executors and with `--executors 0`, and within 1/255 of what today's ComfyUI's
own code (nodes_seedvr.py, vae.py, model.py, the flow sampling at shift 1) makes of the same graph on the same files
(recorded by scripts/record_comfyui_seedvr2_dit.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.served import assert_within_1_of_255_of_record, render_in_both_modes

REPO = Path(__file__).resolve().parents[2]
RECORDED = json.loads((REPO / "tests" / "models" / "fixtures" / "comfyui_seedvr2_dit.json").read_text())["workflow"]
WORKFLOW = json.loads((REPO / "workflows_json" / "seedvr2_3b_upscale_image.json").read_text())


def test_the_workflow_is_the_recorded_graph() -> None:
    nodes = {v["class_type"]: v["inputs"] for v in WORKFLOW.values()}
    assert nodes["KSampler"]["seed"] == RECORDED["seed"] and nodes["KSampler"]["steps"] == 1
    assert nodes["VAEEncodeTiled"]["tile_size"] == RECORDED["tile"] == nodes["VAEDecodeTiled"]["tile_size"]
    assert nodes["VAEEncodeTiled"]["overlap"] == RECORDED["overlap"]
    assert nodes["SeedVR2PostProcessing"]["color_correction_method"] == "none"


def test_seedvr2_upscale_template_in_both_executor_modes_equals_comfyuis(tmp_path) -> None:
    image = render_in_both_modes(tmp_path, WORKFLOW)
    assert image.shape == (128, 128, 3) and image.std() > 0
    assert_within_1_of_255_of_record(image, RECORDED["image"])
