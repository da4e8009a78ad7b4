"""The web UI's HunyuanVideo 1.5 720p image-to-video template (workflows_json/hunyuan_video15_i2v.json, written by
scripts/hunyuan_video15_workflow.py: the template's graph on the tiny files, 64x48, 5 frames, 3 steps, its muted
1080p stage left muted) from a fresh, empty workspace: the video is the same with the default executors and with
`--executors 0`, and its frames equal ComfyUI 0.10.0's frames of the same workflow on the same files (recorded by
scripts/record_comfyui_hunyuan_video15.py) to within 1/255.

The MP4 is lossy, so the frames are compared as PNGs: a SaveImage beside SaveVideo takes VAEDecode's frames."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.e2e.served_video import comfyui_frames, render_videos_in_both_modes, with_png_frames
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows_json" / "hunyuan_video15_i2v.json"
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_hunyuan_video15.json.xz")["workflow"]


def test_recorded_workflow_is_the_shipped_one() -> None:
    assert RECORDED["prompt"] == json.loads(WORKFLOW.read_text())


def test_i2v_template_from_a_fresh_workspace_in_both_executor_modes(tmp_path) -> None:
    frames = render_videos_in_both_modes(tmp_path, {"i2v": with_png_frames(RECORDED["prompt"])})
    pngs, mp4 = frames["i2v"]
    assert pngs.shape == (5, 48, 64, 3) and pngs.std() > 0 and len(mp4) == 5
    diff = np.abs(pngs.astype(int) - comfyui_frames(RECORDED).astype(int))
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ from ComfyUI's frames by more than 1/255"
