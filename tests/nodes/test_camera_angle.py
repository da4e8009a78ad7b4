"""CameraAngle (the multi-angle Qwen-Image-Edit templates' camera picker) gives the newest ComfyUI source's prompt
and camera for a grid of angles and zooms, out-of-range values clamped (tests/nodes/fixtures/
comfyui_camera_angle.json: that source's execute run under ComfyUI 0.10.0's io); bad values are refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodes.library.camera_angle import CameraAngle

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_camera_angle.json").read_text())


def test_prompt_and_camera_equal_comfyuis() -> None:
    for case in FIXTURE["cases"]:
        camera, prompt = CameraAngle().execute(case["horizontal_angle"], case["vertical_angle"], case["zoom"])
        assert prompt == case["prompt"], case
        assert camera == case["camera_info"], case  # the same float arithmetic: equal bit for bit


def test_bad_values_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="horizontal_angle, vertical_angle and zoom"):
        CameraAngle().execute("left", 0, 5.0)
