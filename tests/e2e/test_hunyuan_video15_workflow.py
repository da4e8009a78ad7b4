"""The web UI's HunyuanVideo 1.5 720p image-to-video and text-to-video templates (workflows_json/hunyuan_video15_i2v.json
and _t2v.json, written by scripts/hunyuan_video15_workflow.py: the templates' graphs on the tiny files, 64x48,
5 frames, 3 steps, their muted 1080p stage left muted) from a fresh, empty workspace: the video is the same with the default executors and with
`--executors 0`, and its frames equal ComfyUI 0.10.0's frames of the same workflow on the same files (recorded by
scripts/record_comfyui_hunyuan_video15.py) to within 1/255.

The MP4 is lossy, so the frames are compared as PNGs: a SaveImage beside SaveVideo takes VAEDecode's frames."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.e2e.served import assert_within_1_of_255_of_record
from tests.e2e.served_video import render_videos_in_both_modes, with_png_frames
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
FIXTURE = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_hunyuan_video15.json.xz")
RECORDED = {"i2v": FIXTURE["workflow"], "t2v": FIXTURE["workflow_t2v"]}


def test_recorded_workflows_are_the_shipped_ones() -> None:
    for case, rec in RECORDED.items():
        assert rec["prompt"] == json.loads((REPO / "workflows_json" / f"hunyuan_video15_{case}.json").read_text())


def test_templates_from_a_fresh_workspace_in_both_executor_modes(tmp_path) -> None:
    frames = render_videos_in_both_modes(
        tmp_path, {case: with_png_frames(rec["prompt"]) for case, rec in RECORDED.items()}
    )
    for case, (pngs, mp4) in frames.items():
        assert pngs.shape == (5, 48, 64, 3) and pngs.std() > 0 and len(mp4) == 5, case
        assert_within_1_of_255_of_record(pngs, RECORDED[case]["frames"], f"ComfyUI's {case} frames")
    assert not np.array_equal(frames["i2v"][0], frames["t2v"][0])
