"""The web UI's default graph (comfyui_frontend_package's 10-node Z-Image-Turbo graph), exported with the tiny
demo model's file names, renders on a fresh demo workspace with the default executor and with `--executors 0`,
and both give the same image."""

from __future__ import annotations

import json
import re
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

from tests.e2e.test_samplers_on_executors import render_on_server

REPO = Path(__file__).resolve().parents[2]
API = REPO / "workflows_json" / "z_image_turbo.json"
UI = REPO / "workflows_json" / "z_image_turbo.ui.json"


def frontend_default_graph_source() -> str:
    """The default graph literal in the installed frontend's bundle (the one with the Z-Image loaders)."""
    spec = find_spec("comfyui_frontend_package")
    if spec is None or not spec.origin:
        pytest.skip("comfyui_frontend_package is not installed")
    for js in sorted((Path(spec.origin).parent / "static" / "assets").glob("*.js")):
        text = js.read_text(encoding="utf-8", errors="replace")
        start = text.find("{last_node_id:71,")
        if start >= 0 and "ModelSamplingAuraFlow" in text[start : start + 8000]:
            return text[start : start + 8000]
    pytest.fail("the frontend bundle has no default Z-Image-Turbo graph")


def test_exported_graph_is_the_frontends_default_graph():
    """Same nodes (ids, types, widget values other than file names, latent size and prompt texts) and links."""
    src = frontend_default_graph_source()
    ui = json.loads(UI.read_text())
    types = dict(re.findall(r"\{id:(\d+),type:`(\w+)`", src))
    assert {str(n["id"]): n["type"] for n in ui["nodes"]} == types
    links = json.loads(re.search(r"links:(\[\[.*?\]\]),groups", src).group(1).replace("`", '"'))
    assert ui["links"] == links
    widgets = {n["type"]: n["widgets_values"] for n in ui["nodes"]}
    assert widgets["KSampler"] == [42, "fixed", 8, 1, "res_multistep", "simple", 1]
    assert "widgets_values:[42,`fixed`,8,1,`res_multistep`,`simple`,1]" in src
    assert widgets["ModelSamplingAuraFlow"] == [3] and "widgets_values:[3]" in src
    assert widgets["CLIPLoader"][1:] == ["lumina2", "default"] and "`lumina2`,`default`" in src


def test_default_graph_renders_alike_with_default_executors_and_in_process(serve, demo_workspace, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # one torch thread in every process: bit-identical sums
    prompt = json.loads(API.read_text())
    images = {}
    for mode, flags in (("default", ("--executor-threads", "1")), ("in_process", ("--executors", "0"))):
        base = serve(*flags)
        images[mode] = render_on_server(base, {"z": prompt})["z"]
    a, b = images["default"], images["in_process"]
    assert a.shape == (128, 128, 3) and a.std() > 1.0, "the image is flat"
    assert np.array_equal(a, b), f"{int((a != b).sum())} values differ between the executor modes"
