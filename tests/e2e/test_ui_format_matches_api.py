"""Each shipped workflow exists in both formats, and the UI format converts to exactly the API format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
API_FILES = sorted(p for p in (REPO / "workflows_json").glob("*.json") if not p.name.endswith(".ui.json"))


def _graph(prompt: dict) -> dict:
    return {k: {"class_type": v["class_type"], "inputs": v["inputs"]} for k, v in prompt.items()}


@pytest.mark.parametrize("api_file", API_FILES, ids=lambda p: p.stem)
def test_ui_file_converts_to_api_file(demo_workspace, api_file):
    from comfy_bridge.formats import is_ui_format, ui_to_api
    from comfy_bridge.registry import build_registry

    ui = json.loads(api_file.with_suffix(".ui.json").read_text())
    assert is_ui_format(ui)
    assert _graph(ui_to_api(ui, build_registry(demo_workspace))) == _graph(json.loads(api_file.read_text()))
