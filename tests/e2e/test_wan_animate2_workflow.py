"""Wan Animate 2 through the cluster: workflows_json/wan_animate2.json (the tiny Animate 2 file, the demo umT5,
Wan 2.1 VAE and CLIP vision models; the reference image and a two-frame pose clip held to the length; its own
pose prompt; WanAnimate2Cache; TrimVideoLatent dropping the reference frame) and a variant with a pose window
(pose_end_percent 0.5), pose_strength and reference_image_strength, from a fresh workspace: the frames are the
same with the default executors and with `--executors 0`, and within 1/255 of ComfyUI's (0.10.0's node classes
with the newest source's WanAnimate2ToVideo and Animate 2 network, scripts/record_comfyui_wan_animate2.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.e2e.served_video import comfyui_frames, render_videos_in_both_modes, with_png_frames
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows_json" / "wan_animate2.json"
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_wan_animate2.json.xz")["workflows"]


def test_recorded_workflow_is_the_shipped_one() -> None:
    assert RECORDED["shipped"]["prompt"] == json.loads(WORKFLOW.read_text())
    classes = {v["class_type"] for v in RECORDED["pose_window"]["prompt"].values()}
    assert classes >= {"WanAnimate2ToVideo", "WanAnimate2Cache", "TrimVideoLatent", "SaveVideo"}
    # the pose window and strengths change ComfyUI's frames: the variant checks the pose branch's timing
    assert not np.array_equal(comfyui_frames(RECORDED["shipped"]), comfyui_frames(RECORDED["pose_window"]))


def test_animate2_in_both_executor_modes_equals_comfyuis(tmp_path) -> None:
    prompts = {case: with_png_frames(rec["prompt"]) for case, rec in RECORDED.items()}
    for case, (pngs, mp4) in render_videos_in_both_modes(tmp_path, prompts).items():
        assert pngs.shape == (5, 48, 64, 3) and pngs.std() > 0 and len(mp4) == 5
        diff = np.abs(pngs.astype(int) - comfyui_frames(RECORDED[case]).astype(int))
        assert diff.max() <= 1, f"{case}: {int((diff > 1).sum())} values differ from ComfyUI's by more than 1/255"
