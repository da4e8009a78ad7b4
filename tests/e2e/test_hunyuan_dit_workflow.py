"""HunyuanDiT's text-to-image workflow (workflows_json/hunyuan_dit_t2i.json: demo-models' tiny all-in-one checkpoint
through CheckpointLoaderSimple, CLIPTextEncodeHunyuanDiT for the positive prompt, CLIPTextEncode for the negative,
64x48, 3 steps) from a fresh, empty workspace: the picture is the same with the default executors and with
`--executors 0`, and within 1/255 of ComfyUI 0.3.64's of the same workflow on the same files
(scripts/record_comfyui_hunyuan_dit.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.served import assert_within_1_of_255_of_record, render_in_both_modes
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_hunyuan_dit.json.xz")["workflow"]


def test_workflow_from_a_fresh_workspace_in_both_executor_modes(tmp_path) -> None:
    prompt = json.loads((REPO / "workflows_json" / "hunyuan_dit_t2i.json").read_text())
    assert prompt == RECORDED["prompt"], "the shipped workflow is not the one ComfyUI rendered"
    image = render_in_both_modes(tmp_path, prompt)
    assert image.shape == (48, 64, 3) and image.std() > 0
    (theirs,) = RECORDED["pngs_rgb"]
    assert_within_1_of_255_of_record(image, theirs)
