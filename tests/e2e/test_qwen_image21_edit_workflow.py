"""The web UI's Qwen Image 2.1 image-edit template (workflows_json/qwen_image21_edit.json, written by
scripts/qwen_image21_edit_workflow.py: the template's node graph unpacked from its subgraph, the tiny
qwen-image-2.1 files substituted, both pictures example.png): UNETLoader -> QwenImage21Cache, CLIPLoader qwen_image ->
TextEncodeQwenImage21 with two reference images and the VAE (resolution 0: the references keep their 128x128), its
prompt through the prompt enhancer's switch (off as shipped) and PreviewAny, the latent from the encoder through
the custom-size switch, KSampler euler/simple 25 steps cfg 1, VAEDecode with the 2.1 VAE (RGBA),
SaveImageAdvanced and ImageCompare. From a fresh, empty workspace the image is the same with the default executors
and with `--executors 0`. No ComfyUI that runs here has Qwen Image 2.1: its parts are checked against diffusers
and transformers instead (tests/models/test_qwen_image21*.py, tests/models/test_qwen3vl_vision.py,
tests/nodes/test_qwen_image21_nodes.py)."""

from __future__ import annotations

import json
from pathlib import Path

from scripts.qwen_image21_edit_workflow import TEMPLATE, tiny_template
from tests.e2e.served import render_in_both_modes

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "qwen_image21_edit"


def test_shipped_ui_workflow_is_the_templates_graph() -> None:
    from scripts.templates_coverage import templates_dir

    template = json.loads((templates_dir() / f"{TEMPLATE}.json").read_text())
    ids = {sg["id"] for sg in template["definitions"]["subgraphs"]}
    kept = [n["type"] for n in template["nodes"] if n["type"] not in ids and n["type"] != "MarkdownNote"]
    kept += [n["type"] for sg in template["definitions"]["subgraphs"] for n in sg["nodes"]]
    ui = json.loads(SHIPPED.with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    real = sorted(n["type"] for n in ui["nodes"] if n["type"] not in ("PrimitiveNode", "MarkdownNote"))
    assert real == sorted([t for t in kept if t != "MarkdownNote"] + ["PrimitiveStringMultiline"])


def test_template_renders_the_same_in_both_executor_modes(tmp_path) -> None:
    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    encode = next(n for n in prompt.values() if n["class_type"] == "TextEncodeQwenImage21")
    assert {"images.image_1", "images.image_2", "vae"} <= set(encode["inputs"])  # two references, as shipped
    default = render_in_both_modes(tmp_path, prompt)
    assert default.shape == (128, 128, 4) and default[..., :3].std() > 0  # the first reference's size, RGBA
