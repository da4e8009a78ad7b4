"""The web UI's Marigold V2 depth template (workflows_json/marigold_v2_depth.json, written by
scripts/marigold_workflow.py: the template's node graph with its subgraph unpacked, the tiny stand-ins of
nodes/models/marigold_demo.py and the Qwen-Image family substituted, example.png as its input): UNETLoader on the
int8 ConvRot Qwen-Image-Edit 2509 file, LoraLoaderModelOnly, ModelSamplingAuraFlow(1.73, img_to_img_velocity),
ConditioningLoader -> BasicGuider, VAEEncode, ManualSigmas "0.5, 0", KSamplerSelect euler, DisableNoise,
SamplerCustomAdvanced, VAEDecode, MarigoldV2PostProcess depth, SaveImageAdvanced and Image Compare. From a fresh,
empty workspace (serve builds the demo files on its first start) the depth image is the same with the default
executors and with `--executors 0`; the sampling step and the post-processing equal today's ComfyUI's module code in
tests/nodes/test_marigold.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from scripts.marigold_workflow import TEMPLATE, tiny_template
from tests.e2e.served import render_with_serve

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "marigold_v2_depth"


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
    sampling = [n["inputs"] for n in prompt.values() if n["class_type"] == "ModelSamplingAuraFlow"]
    assert sampling == [{"shift": 1.73, "sampling": "img_to_img_velocity", "model": ["7", 0]}]


def test_template_in_both_executor_modes(tmp_path) -> None:
    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    workspace = tmp_path / "fresh"
    default = render_with_serve(workspace, tmp_path / "default.log", prompt)
    in_process = render_with_serve(workspace, tmp_path / "executors0.log", prompt, "--executors", "0")
    assert default.shape == (128, 128, 3) and default.std() > 0
    assert np.array_equal(default, in_process), (
        f"{int((default != in_process).sum())} values differ between the executor modes"
    )
