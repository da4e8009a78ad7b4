"""The web UI's Wan 2.2 14B Fun Inpaint template (workflows_json/wan22_fun_inpaint.json, written by
scripts/wan_fun_template_workflow.py with wan-tiny's Fun InP model for both experts and the tiny 4-step LoRAs)
from a fresh, empty workspace: the video is the same with the default executors and with `--executors 0`, and
its frames equal ComfyUI 0.10.0's frames of the same workflow on the same files (recorded by
scripts/record_comfyui_wan_fun.py) to within 1/255."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.e2e.test_wan_workflow import (
    comfyui_frames,
    render_with_serve,
    with_png_frames,
)

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows_json" / "wan22_fun_inpaint.json"
RECORDED = json.loads((REPO / "tests" / "models" / "fixtures" / "comfyui_wan_fun.json").read_text())[
    "workflow_fun_inpaint"]


def test_recorded_workflow_is_the_shipped_one() -> None:
    shipped = json.loads(WORKFLOW.read_text())
    assert RECORDED["prompt"] == shipped
    assert {v["class_type"] for v in shipped.values()} >= {"WanFunInpaintToVideo", "KSamplerAdvanced", "SaveVideo"}


def test_fun_inpaint_template_in_both_executor_modes_equals_comfyuis(tmp_path) -> None:
    prompts = {"fun_inpaint": with_png_frames(RECORDED["prompt"])}
    workspace = tmp_path / "fresh"
    (pngs, mp4), = render_with_serve(workspace, tmp_path / "default.log", prompts).values()
    (other_pngs, other_mp4), = render_with_serve(workspace, tmp_path / "executors0.log", prompts,
                                                 "--executors", "0").values()
    assert pngs.shape == (5, 64, 64, 3) and pngs.std() > 0 and len(mp4) == 5
    assert np.array_equal(pngs, other_pngs), "frames differ between the executor modes"
    assert all(np.array_equal(a, b) for a, b in zip(mp4, other_mp4, strict=True)), \
        "the MP4's frames differ between the executor modes"
    diff = np.abs(pngs.astype(int) - comfyui_frames(RECORDED).astype(int))
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ from ComfyUI's frames by more than 1/255"
