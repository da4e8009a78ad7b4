"""The web UI's Depth Anything 3 image depth template (workflows_json/da3_image_depth_estimation.json, written by
scripts/da3_depth_workflow.py: the template's node graph with its subgraph unpacked, the tiny DA3 Mono-Large file and
example.png substituted): LoadImage, LoadDA3Model, DA3Inference (504, upper_bound_resize, mono), DA3Render (depth,
v2_style) and the preview (the template's ImageCompare is left out here: one image per prompt). From a fresh, empty
workspace (serve builds the demo files on its first start) the preview is the same with the default executors and
with `--executors 0`, and within 1/255 of what ComfyUI's newest DA3 code gives on the same file and image
(tests/models/fixtures/comfyui_da3.json.xz, scripts/record_comfyui_da3.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from scripts.da3_depth_workflow import TEMPLATE, tiny_template
from tests.e2e.served import assert_within_1_of_255_of_record, serving
from tests.e2e.test_samplers_on_executors import render_on_server
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "da3_image_depth_estimation"
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_da3.json")["template"]
PREVIEW, COMPARE = "6", "80"


def test_shipped_workflow_is_the_templates_graph() -> None:
    from scripts.templates_coverage import templates_dir

    template = json.loads((templates_dir() / f"{TEMPLATE}.json").read_text())
    ui = json.loads(SHIPPED.with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    subgraphs = template["definitions"]["subgraphs"]
    ids = {sg["id"] for sg in subgraphs}
    outer = [n["type"] for n in template["nodes"] if n["type"] not in ids]
    assert sorted(n["type"] for n in ui["nodes"]) == sorted(
        outer + [n["type"] for sg in subgraphs for n in sg["nodes"]]
    )
    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    assert prompt[PREVIEW]["class_type"] == "PreviewImage" and prompt[COMPARE]["class_type"] == "ImageCompare"
    # the subgraph's one output feeds both the preview and the comparison
    assert prompt[PREVIEW]["inputs"]["images"] == prompt[COMPARE]["inputs"]["image_b"]


def test_template_in_both_executor_modes_equals_comfyui(tmp_path) -> None:
    prompt = {k: v for k, v in json.loads(SHIPPED.with_suffix(".json").read_text()).items() if k != COMPARE}
    workspace = tmp_path / "fresh"
    with serving(workspace, tmp_path / "default.log") as base:
        default = render_on_server(base, {PREVIEW: prompt}, timeout_s=600)
    with serving(workspace, tmp_path / "executors0.log", "--executors", "0") as base:
        in_process = render_on_server(base, {PREVIEW: prompt}, timeout_s=600)
    ours = default[PREVIEW][..., :3]
    assert np.array_equal(ours, in_process[PREVIEW][..., :3]), "the executor modes differ"
    assert ours.shape == (128, 128, 3) and ours.std() > 0
    assert_within_1_of_255_of_record(ours, RECORDED["preview"], "ComfyUI's depth preview")
