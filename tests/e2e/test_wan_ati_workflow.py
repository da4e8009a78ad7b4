"""The web UI's Wan ATI template (workflows_json/wan21_ati.json, written by scripts/wan_ati_template_workflow.py:
wan-tiny's Wan 2.1 image-to-video model for the ATI file, the template's track scaled to 64x48, WanTrackToVideo)
from a fresh, empty workspace: the video is the same with the default executors and with `--executors 0`, and its
frames are within 1/255 of ComfyUI 0.3.64's frames of the same workflow on the same files (recorded by
scripts/record_comfyui_wan_phantom_track.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.served import assert_within_1_of_255_of_record
from tests.e2e.served_video import render_videos_in_both_modes, with_png_frames
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows_json" / "wan21_ati.json"
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_wan_phantom_track.json.xz")["workflow_ati"]


def test_recorded_workflow_is_the_shipped_one() -> None:
    assert RECORDED["prompt"] == json.loads(WORKFLOW.read_text())
    classes = {v["class_type"] for v in RECORDED["prompt"].values()}
    assert classes >= {"WanTrackToVideo", "PrimitiveStringMultiline", "CLIPVisionEncode", "KSampler", "SaveVideo"}
    (track,) = [v for v in RECORDED["prompt"].values() if v["class_type"] == "PrimitiveStringMultiline"]
    assert len(json.loads(track["inputs"]["value"])[0]) == 162  # the template's track, every point kept


def test_ati_template_in_both_executor_modes_equals_comfyuis(tmp_path) -> None:
    (pngs, mp4) = render_videos_in_both_modes(tmp_path, {"ati": with_png_frames(RECORDED["prompt"])})["ati"]
    assert pngs.shape == (5, 48, 64, 3) and pngs.std() > 0 and len(mp4) == 5
    assert_within_1_of_255_of_record(pngs, RECORDED["frames"], "ComfyUI's frames")
