"""ComfyUI's Stable Cascade workflow (workflows_json/stable_cascade.json, UI format beside it): the tiny stage C
checkpoint's prior sampled from StableCascade_EmptyLatentImage, handed to stage B by
StableCascade_StageB_Conditioning, stage B sampled and decoded by the stage B checkpoint's stage A. From a fresh,
empty workspace (serve builds the demo files on its first start) the image is the same with the default executors
and with `--executors 0`, and equals ComfyUI 0.3.64's image of the same workflow on the same files within 1/255
(recorded by scripts/record_comfyui_stable_cascade.py). The samplers are euler: 0.3.64's ancestral noise stream on
the CPU is seeded one lower than the newer ComfyUI's this project follows (nodes/sampling/noise.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.served import assert_within_1_of_255_of_record, render_in_both_modes

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "stable_cascade"
RECORDED = json.loads((REPO / "tests" / "models" / "fixtures" / "comfyui_stable_cascade.json").read_text())["workflow"]


def test_shipped_workflow_is_the_recorded_one() -> None:
    assert RECORDED["prompt"] == json.loads(SHIPPED.with_suffix(".json").read_text())


def test_workflow_in_both_executor_modes_equals_comfyuis(tmp_path) -> None:
    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    default = render_in_both_modes(tmp_path, prompt)
    assert default.shape == (256, 256, 3) and default.std() > 0
    (png,) = RECORDED["pngs_rgb"]
    assert_within_1_of_255_of_record(default, png)
