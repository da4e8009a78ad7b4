"""The web UI's MoGe depth estimation template (workflows_json/moge_depth_estimation.json, written by
scripts/moge_depth_workflow.py: the template's node graph with its subgraph unpacked, the tiny MoGe-2 file and
example.png substituted): LoadImage, GetImageSize, ComfyMathExpression and two ComfySwitchNodes (no resize below
2048 px), LoadMoGeModel, MoGeInference (resolution level 2), MoGeRender depth_colored / depth / mask, ImageToMask and
the three previews. From a fresh, empty workspace (serve builds the demo files on its first start) each preview is the
same with the default executors and with `--executors 0`, and within 1/255 of what ComfyUI's newest MoGe code gives
on the same file and image (tests/models/fixtures/comfyui_moge.json.xz, scripts/record_comfyui_moge.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from scripts.moge_depth_workflow import TEMPLATE, tiny_template
from tests.e2e.served import assert_within_1_of_255_of_record, serving
from tests.e2e.test_samplers_on_executors import render_on_server
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "moge_depth_estimation"
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_moge.json")["template"]
# preview node -> the render it shows
PREVIEWS = {"17": "depth_colored", "26": "depth", "69": "mask"}


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
    assert {prompt[k]["class_type"] for k in PREVIEWS} == {"PreviewImage", "MaskPreview"}


def _one_preview_each(prompt: dict) -> dict[str, dict]:
    return {k: {n: v for n, v in prompt.items() if n == k or n not in PREVIEWS} for k in PREVIEWS}


def test_template_in_both_executor_modes_equals_comfyui(tmp_path) -> None:
    prompts = _one_preview_each(json.loads(SHIPPED.with_suffix(".json").read_text()))
    workspace = tmp_path / "fresh"
    with serving(workspace, tmp_path / "default.log") as base:
        default = render_on_server(base, prompts, timeout_s=600)
    with serving(workspace, tmp_path / "executors0.log", "--executors", "0") as base:
        in_process = render_on_server(base, prompts, timeout_s=600)
    for node, mode in PREVIEWS.items():
        ours = default[node][..., :3]
        assert np.array_equal(ours, in_process[node][..., :3]), f"{mode}: the executor modes differ"
        assert ours.shape == (128, 128, 3) and ours.std() > 0
        assert_within_1_of_255_of_record(ours, RECORDED["previews"][mode], f"ComfyUI's {mode} preview")
