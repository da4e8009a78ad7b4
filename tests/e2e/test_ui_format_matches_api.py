"""Each shipped workflow exists in both formats, and the UI format converts to exactly the API format.

The API files of the Wan template workflows and of wan_animate2 are the prompts ComfyUI 0.10.0 ran for their
recorded fixtures (the e2e tests pin them), so they spell SaveVideo's codec as 0.10.0 did, a plain top-level
`codec`, and give CreateVideo no bit depth. Today's SaveVideo nests the codec under its format (`format.codec`) and today's CreateVideo has
`bit_depth` / `color_space`, so their UI files convert to today's spelling of the same choices; both run today
(tests/nodes/test_video_today.py). For those files the converted prompt is compared in 0.10.0's spelling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
API_FILES = sorted(p for p in (REPO / "workflows_json").glob("*.json") if not p.name.endswith(".ui.json"))


RECORDED_ON_0_10 = {"wan21_fun_camera", "wan21_vace_v2v", "wan22_5b", "wan22_fun_inpaint", "wan22_i2v", "wan_animate2"}


def _in_0_10_spelling(prompt: dict) -> dict:
    """Today's SaveVideo / CreateVideo inputs as ComfyUI 0.10.0 spelled the same choices."""
    for node in prompt.values():
        inputs = node["inputs"]
        if node["class_type"] == "SaveVideo" and not any(k.startswith("format.codec.") for k in inputs):
            nested = inputs.pop("format.codec", None)
            if nested is not None and inputs.setdefault("codec", nested) != nested:
                raise AssertionError(f"SaveVideo: codec {inputs['codec']!r} and format.codec {nested!r} differ")
        if node["class_type"] == "CreateVideo" and inputs.get("color_space", "sRGB") == "sRGB":
            if inputs.get("bit_depth", 8) in (8, "auto") and inputs.get("codec", "none") == "none":
                for name in ("bit_depth", "color_space", "codec"):
                    inputs.pop(name, None)
    return prompt


def _graph(prompt: dict) -> dict:
    return {k: {"class_type": v["class_type"], "inputs": v["inputs"]} for k, v in prompt.items()}


@pytest.mark.parametrize("api_file", API_FILES, ids=lambda p: p.stem)
def test_ui_file_converts_to_api_file(demo_workspace, api_file):
    from comfy_bridge.formats import is_ui_format, ui_to_api
    from comfy_bridge.registry import build_registry

    ui = json.loads(api_file.with_suffix(".ui.json").read_text())
    assert is_ui_format(ui)
    converted = ui_to_api(ui, build_registry(demo_workspace))
    if api_file.stem in RECORDED_ON_0_10:
        converted = _in_0_10_spelling(converted)
    assert _graph(converted) == _graph(json.loads(api_file.read_text()))
