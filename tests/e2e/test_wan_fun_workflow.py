"""The web UI's Wan 2.2 14B Fun Inpaint template (workflows_json/wan22_fun_inpaint.json, written by
scripts/wan_fun_template_workflow.py with wan-tiny's Fun InP model for both experts and the tiny 4-step LoRAs)
and its Wan 2.1 Fun Camera v1.1 1.3B template (workflows_json/wan21_fun_camera.json: wan-tiny's Fun Camera
model, the demo CLIP vision model, Zoom In) from a fresh, empty workspace: the video is the same with the default executors and with `--executors 0`, and
its frames equal ComfyUI 0.10.0's frames of the same workflow on the same files (recorded by
scripts/record_comfyui_wan_fun.py) to within 1/255."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.e2e.served_video import comfyui_frames, render_videos_in_both_modes, with_png_frames
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows_json" / "wan22_fun_inpaint.json"
FIXTURE = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_wan_fun.json.xz")
RECORDED = {"fun_inpaint": FIXTURE["workflow_fun_inpaint"], "fun_camera": FIXTURE["workflow_fun_camera"]}
SHIPPED = {"fun_inpaint": WORKFLOW, "fun_camera": REPO / "workflows_json" / "wan21_fun_camera.json"}


def test_recorded_workflows_are_the_shipped_ones() -> None:
    for case, path in SHIPPED.items():
        assert RECORDED[case]["prompt"] == json.loads(path.read_text()), case
    classes = {case: {v["class_type"] for v in rec["prompt"].values()} for case, rec in RECORDED.items()}
    assert classes["fun_inpaint"] >= {"WanFunInpaintToVideo", "KSamplerAdvanced", "SaveVideo"}
    assert classes["fun_camera"] >= {"WanCameraEmbedding", "WanCameraImageToVideo", "CLIPVisionEncode", "SaveVideo"}


def test_fun_templates_in_both_executor_modes_equal_comfyuis(tmp_path) -> None:
    prompts = {case: with_png_frames(rec["prompt"]) for case, rec in RECORDED.items()}
    default = render_videos_in_both_modes(tmp_path, prompts)
    for case, (pngs, mp4) in default.items():
        assert pngs.shape == (5, 64, 64, 3) and pngs.std() > 0 and len(mp4) == 5
        diff = np.abs(pngs.astype(int) - comfyui_frames(RECORDED[case]).astype(int))
        assert diff.max() <= 1, (
            f"{case}: {int((diff > 1).sum())} values differ from ComfyUI's frames by more than 1/255"
        )
