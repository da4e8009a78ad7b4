"""The web UI's frame interpolation template (workflows_json/frame_interpolation_template.json, written by
scripts/frame_interpolation_workflow.py: the demo FILM file at the template's name, example.mp4 as the clip,
multiplier 2) from a fresh, empty workspace: its interpolated frames (a SaveImage beside the template's SaveVideo)
and the MP4 are the same with the default executors and with `--executors 0`, and the frames are within 1/255 of
the newest ComfyUI's FrameInterpolate on the same clip and file (scripts/record_comfyui_frame_interpolation.py)."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from scripts.frame_interpolation_workflow import tiny_template
from tests.e2e.served import REPO
from tests.e2e.served_video import render_videos_in_both_modes
from tests.recorded_tensors import at_recorded, load_json, pixels

WORKFLOW = REPO / "workflows_json" / "frame_interpolation_template.json"
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_frame_interpolation.json.xz")["template"]


def test_shipped_ui_workflow_is_the_templates_graph() -> None:
    ui = json.loads(WORKFLOW.with_suffix("").with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    assert {"FrameInterpolationModelLoader", "FrameInterpolate"} <= {n["type"] for n in ui["nodes"]}


def test_template_same_in_both_executor_modes_and_as_comfyui(tmp_path) -> None:
    prompt = json.loads(WORKFLOW.read_text())
    (interpolate,) = [k for k, v in prompt.items() if v["class_type"] == "FrameInterpolate"]
    prompt["900"] = {"class_type": "SaveImage", "inputs": {"images": [interpolate, 0], "filename_prefix": "vfi"}}
    (pngs, mp4) = render_videos_in_both_modes(tmp_path, {"template": prompt})["template"]
    clip = tmp_path / "fresh" / "input" / "example.mp4"
    assert hashlib.sha256(clip.read_bytes()).hexdigest() == RECORDED["clip"]  # the clip ComfyUI read
    assert pngs.shape == (17, 64, 64, 3) and len(mp4) == 17 and pngs.std() > 0
    diff = np.abs(at_recorded(pngs, RECORDED["frames"]).astype(int) - pixels(RECORDED["frames"]).astype(int))
    assert diff.max() <= 1, f"{int((diff > 1).sum())} values differ from ComfyUI's by more than 1/255"
