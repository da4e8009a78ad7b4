"""A Wan Phantom subject-to-video workflow (workflows_json/wan21_phantom.json: wan-tiny's Wan 2.1 text-to-video
model, two subject images, example.png and its inverse, through WanPhantomSubjectToVideo, KSampler with its
image-free negative) from a fresh, empty workspace: the video is the same with the default executors and with
`--executors 0` (the subject frames travel with the conditioning to the executors), and its frames are within 1/255
of ComfyUI 0.3.64's frames of the same workflow on the same files (recorded by
scripts/record_comfyui_wan_phantom_track.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.served import assert_within_1_of_255_of_record
from tests.e2e.served_video import render_videos_in_both_modes, with_png_frames
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows_json" / "wan21_phantom.json"
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_wan_phantom_track.json.xz")["workflow_phantom"]


def test_recorded_workflow_is_the_shipped_one() -> None:
    assert RECORDED["prompt"] == json.loads(WORKFLOW.read_text())
    (node,) = [v for v in RECORDED["prompt"].values() if v["class_type"] == "WanPhantomSubjectToVideo"]
    (sampler,) = [v for v in RECORDED["prompt"].values() if v["class_type"] == "KSampler"]
    assert RECORDED["prompt"][node["inputs"]["images"][0]]["class_type"] == "ImageBatch"  # two subjects
    assert sampler["inputs"]["negative"][1] == 2  # negative_img_text: the subject frames' latent zero


def test_phantom_workflow_in_both_executor_modes_equals_comfyuis(tmp_path) -> None:
    (pngs, mp4) = render_videos_in_both_modes(tmp_path, {"phantom": with_png_frames(RECORDED["prompt"])})["phantom"]
    assert pngs.shape == (5, 48, 64, 3) and pngs.std() > 0 and len(mp4) == 5
    assert_within_1_of_255_of_record(pngs, RECORDED["frames"], "ComfyUI's frames")
