"""The web UI's Krea 2 Turbo text-to-image template (workflows_json/krea2_turbo_t2i.json, written by
scripts/krea2_workflow.py: the template's node graph unpacked from its subgraph, the tiny krea2 files and
qwen-image-tiny's VAE substituted, 0.1 megapixels): UNETLoader (through the style-LoRA switch, off as shipped),
CLIPLoader krea2 -> the prompt enhancer (TextGenerate, on as shipped) -> CLIPTextEncode, ConditioningZeroOut as the
negative,
EmptyLatentImage from ResolutionSelector, KSampler euler/simple 8 steps cfg 1, VAEDecode, SaveImage. From a fresh,
empty workspace (serve builds the demo files on its first start) the image is the same with the default
executors and with `--executors 0`. No ComfyUI that runs here has Krea 2: its parts are checked against diffusers
instead (tests/models/test_krea2*.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from scripts.krea2_workflow import TEMPLATE, tiny_template
from tests.e2e.served import render_in_both_modes, render_with_serve

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "krea2_turbo_t2i"


def test_shipped_ui_workflow_is_the_templates_graph() -> None:
    from scripts.templates_coverage import templates_dir

    template = json.loads((templates_dir() / f"{TEMPLATE}.json").read_text())
    ids = {sg["id"] for sg in template["definitions"]["subgraphs"]}
    inner = [n["type"] for sg in template["definitions"]["subgraphs"] for n in sg["nodes"]]
    outer = [n["type"] for n in template["nodes"] if n["type"] not in ids]
    ui = json.loads(SHIPPED.with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    assert sorted(n["type"] for n in ui["nodes"]) == sorted(inner + outer + ["PrimitiveStringMultiline"])


def test_template_renders_the_same_in_both_executor_modes(tmp_path) -> None:
    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    default = render_in_both_modes(tmp_path, prompt)
    assert default.shape == (320, 320, 3) and default.std() > 0
    # the enhancer's text is what gets encoded: switched off, the template's own prompt gives another image
    (enhance,) = [
        k
        for k, n in prompt.items()
        if n["class_type"] == "ComfySwitchNode" and prompt[n["inputs"]["on_true"][0]]["class_type"] == "TextGenerate"
    ]
    prompt[prompt[enhance]["inputs"]["switch"][0]]["inputs"]["value"] = False
    plain = render_with_serve(tmp_path / "fresh", tmp_path / "plain.log", prompt, "--executors", "0")
    assert plain.shape == default.shape and not np.array_equal(plain, default)
