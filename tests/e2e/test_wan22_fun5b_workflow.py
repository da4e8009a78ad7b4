"""The web UI's Wan 2.2 5B Fun Control template (workflows_json/wan22_fun_control_5b.json, written by
scripts/wan22_fun5b_workflow.py: its graph on wan-tiny's Fun Control 5B model, umt5 and Wan 2.2 VAE, the workspace's
example.mp4 as control video and example.png as reference image, 64x64, 9 frames, 3 uni_pc steps) from a fresh,
empty workspace: the video is the same with the default executors and with `--executors 0`, and its frames equal
ComfyUI 0.3.64's frames of the same workflow on the same files within 1/255 (recorded, at a strided grid of the
frames, by scripts/record_comfyui_wan22_fun5b.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from scripts.wan22_fun5b_workflow import OUT, workflow
from tests.e2e.served_video import comfyui_frames, render_videos_in_both_modes, with_png_frames
from tests.recorded_tensors import at_recorded, load_json

REPO = Path(__file__).resolve().parents[2]
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_wan22_fun5b.json.xz")["workflow_fun_control_5b"]


def test_shipped_workflow_is_the_written_and_recorded_one() -> None:
    shipped = json.loads(OUT.read_text())
    assert shipped == workflow() == RECORDED["prompt"]
    assert {v["class_type"] for v in shipped.values()} >= {"Wan22FunControlToVideo", "LoadVideo", "SaveVideo"}


def test_template_in_both_executor_modes_equals_comfyuis(tmp_path) -> None:
    ((pngs, mp4),) = render_videos_in_both_modes(
        tmp_path, {"fun_control_5b": with_png_frames(RECORDED["prompt"])}
    ).values()
    assert pngs.shape == (9, 64, 64, 3) and pngs.std() > 0 and len(mp4) == 9
    diff = np.abs(at_recorded(pngs, RECORDED["frames"]).astype(int) - comfyui_frames(RECORDED).astype(int))
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ from ComfyUI's frames by more than 1/255"
