"""Wan SCAIL-2 through the cluster: workflows_json/wan_scail2.json (the tiny SCAIL-2 file with the tiny i2v LoRA,
the demo umT5, Wan 2.1 VAE and CLIP vision models; replacement mode with the reference and its mask, the pose clip
and its mask video; then an extension chunk anchored on the first chunk's last frame, from its video_frame_offset,
with a pose window and pose_strength), from a fresh workspace: the frames are the same with the default executors
and with `--executors 0`, and within 1/255 of ComfyUI's (0.10.0's node classes with the newest source's
WanSCAILToVideo and SCAIL-2 model, scripts/record_comfyui_wan_scail.py).

Until SAM3_VideoTrack is offered the identity masks are the inverted pictures (ImageInvert) instead of
SCAIL2ColoredMask's rendering of SAM3 tracks; the template itself (video_wan21_scail2_character_replacement)
needs SAM3."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.e2e.served_video import comfyui_frames, render_videos_in_both_modes
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows_json" / "wan_scail2.json"
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_wan_scail.json.xz")["workflow"]


def with_png_frames(prompt: dict) -> dict:
    """The prompt with a SaveImage of the last chunk's frames (the VAEDecode SaveVideo shows)."""
    (create,) = [v for v in prompt.values() if v["class_type"] == "CreateVideo"]
    decode = create["inputs"]["images"][0]
    return {**prompt, "900": {"class_type": "SaveImage", "inputs": {"images": [decode, 0], "filename_prefix": "wan"}}}


def test_recorded_workflow_is_the_shipped_one() -> None:
    assert RECORDED["prompt"] == json.loads(WORKFLOW.read_text())


def test_scail2_in_both_executor_modes_equals_comfyuis(tmp_path) -> None:
    prompt = json.loads(WORKFLOW.read_text())
    classes = {v["class_type"] for v in prompt.values()}
    assert {"WanSCAILToVideo", "LoraLoaderModelOnly", "CLIPVisionEncode", "SaveVideo"} <= classes
    (pngs, mp4) = render_videos_in_both_modes(tmp_path, {"shipped": with_png_frames(prompt)})["shipped"]
    assert pngs.shape == (5, 64, 64, 3) and pngs.std() > 0 and len(mp4) == 5
    diff = np.abs(pngs.astype(int) - comfyui_frames(RECORDED).astype(int))
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ from ComfyUI's by more than 1/255"
