"""PixArt-Σ text to image (workflows_json/pixart_sigma_text_to_image.json, written by scripts/pixart_workflow.py: the
tiny PixArt-Σ through UNETLoader, CLIPLoader type pixart on flux-tiny's T5, CLIPTextEncodePixArtAlpha and
CLIPTextEncode, KSampler euler 4 steps at 384x320, sd1-tiny-vae). From a fresh, empty workspace (serve builds the
demo files on its first start) the image is the same with the default executors and with `--executors 0`, and
equals ComfyUI 0.3.64's image of the same workflow on the same files within 1/255 (recorded by
scripts/record_comfyui_pixart.py)."""

from __future__ import annotations

import json
from pathlib import Path

from scripts.pixart_workflow import api
from tests.e2e.served import assert_within_1_of_255_of_record, render_in_both_modes
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "pixart_sigma_text_to_image"
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_pixart.json.xz")["image_workflow"]


def test_shipped_workflow_is_the_recorded_one() -> None:
    assert json.loads(SHIPPED.with_suffix(".json").read_text()) == api() == RECORDED["prompt"]


def test_workflow_in_both_executor_modes_equals_comfyuis(tmp_path) -> None:
    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    default = render_in_both_modes(tmp_path, prompt)
    assert default.shape == (320, 384, 3) and default.std() > 0
    (png,) = RECORDED["pngs_rgb"]
    assert_within_1_of_255_of_record(default, png)
