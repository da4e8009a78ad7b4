"""The web UI's Qwen Image 2.1 text-to-image template (workflows_json/qwen_image21_t2i.json, written by
scripts/qwen_image21_workflow.py: the template's node graph unpacked from its subgraph, the tiny qwen-image-2.1
files substituted, 0.1 megapixels): UNETLoader -> QwenImage21Cache, CLIPLoader qwen_image ->
TextEncodeQwenImage21 (its prompt through the prompt enhancer's switch, off as shipped, and PreviewAny),
EmptyLatentImage from ResolutionSelector, KSampler euler/simple 25 steps, VAEDecode with the 2.1 VAE (RGBA),
SaveImageAdvanced. From a fresh, empty workspace (serve builds the demo files on its first start) the image is
the same with the default executors and with `--executors 0`. No ComfyUI that runs here has Qwen Image 2.1:
its parts are checked against diffusers instead (tests/models/test_qwen_image21*.py,
tests/nodes/test_qwen_image21_nodes.py)."""

from __future__ import annotations

import json
from pathlib import Path

from scripts.qwen_image21_workflow import TEMPLATE, tiny_template
from tests.e2e.served import render_in_both_modes

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "qwen_image21_t2i"


def test_shipped_ui_workflow_is_the_templates_graph() -> None:
    from scripts.templates_coverage import templates_dir

    template = json.loads((templates_dir() / f"{TEMPLATE}.json").read_text())
    inner = [n["type"] for sg in template["definitions"]["subgraphs"] for n in sg["nodes"]]
    outer = [
        n["type"]
        for n in template["nodes"]
        if n["type"] not in {sg["id"] for sg in template["definitions"]["subgraphs"]}
    ]
    ui = json.loads(SHIPPED.with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    assert sorted(n["type"] for n in ui["nodes"]) == sorted(inner + outer + ["PrimitiveStringMultiline"])


def test_template_renders_the_same_in_both_executor_modes(tmp_path) -> None:
    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    default = render_in_both_modes(tmp_path, prompt)
    assert default.shape == (320, 320, 4) and default[..., :3].std() > 0  # RGBA, as the 2.1 VAE decodes
