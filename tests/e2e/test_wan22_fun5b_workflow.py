"""The web UI's Wan 2.2 5B Fun Control and Fun Inpaint templates (workflows_json/wan22_fun_{control,inpaint}_5b{.ui,}.json,
written by scripts/wan22_fun5b_workflow.py: their graphs on wan-tiny's Fun Control / InP 5B model, umt5 and Wan 2.2
VAE; control: the workspace's example.mp4 as control video and example.png as reference image; inpaint: example.png as
start and end image; 64x64, 9 frames, 3 uni_pc steps) from a fresh, empty workspace: each video is the same with the
default executors and with `--executors 0`, and its frames equal ComfyUI 0.3.64's frames of the same workflow on the
same files within 1/255 (recorded, at a strided grid of the frames, by scripts/record_comfyui_wan22_fun5b.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scripts.anima_lllite_workflow import builtin_registry
from scripts.wan22_fun5b_workflow import OUT, tiny_template
from tests.e2e.served_video import comfyui_frames, render_videos_in_both_modes, with_png_frames
from tests.recorded_tensors import at_recorded, load_json

REPO = Path(__file__).resolve().parents[2]
FIXTURE = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_wan22_fun5b.json.xz")
RECORDED = {name: FIXTURE[f"workflow_fun_{name}_5b"] for name in OUT}
NODE = {"control": "Wan22FunControlToVideo", "inpaint": "WanFunInpaintToVideo"}


@pytest.mark.parametrize("name", sorted(OUT))
def test_shipped_workflow_is_the_written_and_recorded_one(name: str) -> None:
    from comfy_bridge.formats import ui_to_api

    ui = json.loads(OUT[name].with_suffix(".ui.json").read_text())
    assert ui == tiny_template(name)
    shipped = json.loads(OUT[name].with_suffix(".json").read_text())
    assert shipped == ui_to_api(ui, builtin_registry()) == RECORDED[name]["prompt"]
    assert {v["class_type"] for v in shipped.values()} >= {NODE[name], "SaveVideo"}


def test_templates_in_both_executor_modes_equal_comfyuis(tmp_path) -> None:
    prompts = {name: with_png_frames(rec["prompt"]) for name, rec in RECORDED.items()}
    for name, (pngs, mp4) in render_videos_in_both_modes(tmp_path, prompts).items():
        assert pngs.shape == (9, 64, 64, 3) and pngs.std() > 0 and len(mp4) == 9, name
        diff = np.abs(
            at_recorded(pngs, RECORDED[name]["frames"]).astype(int) - comfyui_frames(RECORDED[name]).astype(int)
        )
        assert diff.max() <= 1, (
            f"{name}: {int((diff > 1).sum())} values differ from ComfyUI's frames by more than 1/255"
        )
