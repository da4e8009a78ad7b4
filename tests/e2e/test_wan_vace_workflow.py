"""The web UI's Wan VACE video-to-video template (workflows_json/wan21_vace_v2v.json, written by
scripts/wan_vace_template_workflow.py with wan-tiny's VACE model and its tiny LoRA, the workspace's example.mp4
as control video and example.png as reference image) from a fresh, empty workspace: the video is the same with
the default executors and with `--executors 0`, and its frames equal ComfyUI 0.10.0's frames of the same
workflow on the same files (recorded by scripts/record_comfyui_wan_vace.py) to within 1/255."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.e2e.served_video import comfyui_frames, render_videos_in_both_modes, with_png_frames
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows_json" / "wan21_vace_v2v.json"
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_wan_vace.json.xz")["workflow"]


def test_recorded_workflow_is_the_shipped_one() -> None:
    assert RECORDED["prompt"] == json.loads(WORKFLOW.read_text())
    classes = {v["class_type"] for v in RECORDED["prompt"].values()}
    assert classes >= {"WanVaceToVideo", "TrimVideoLatent", "LoadVideo", "GetVideoComponents", "LoraLoader"}
    # the reference image adds one latent frame in front, which TrimVideoLatent cuts off again
    assert RECORDED["latent_shape"] == [1, 16, 2, 8, 8]


def test_vace_template_in_both_executor_modes_equals_comfyuis(tmp_path) -> None:
    prompts = {"vace_v2v": with_png_frames(RECORDED["prompt"])}
    pngs, mp4 = render_videos_in_both_modes(tmp_path, prompts)["vace_v2v"]
    assert (tmp_path / "fresh" / "input" / "example.mp4").is_file()
    assert pngs.shape == (5, 64, 64, 3) and pngs.std() > 0 and len(mp4) == 5
    diff = np.abs(pngs.astype(int) - comfyui_frames(RECORDED).astype(int))
    print(f"max difference from ComfyUI 0.10.0: {diff.max()}/255")
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ from ComfyUI's frames by more than 1/255"
