"""The web UI's USO template (workflows_json/uso_reference.json, written by scripts/uso_reference_workflow.py: its own
graph with the subgraphs unpacked and the two style-reference subgraphs bypassed as shipped, on
nodes/models/uso_demo.py's flux1-dev-uso-tiny and the tiny USO DiT LoRA, example.png as the character reference):
from a fresh workspace (serve builds the demo files on its first start) the image is identical with the default
executors and with `--executors 0`, and differs from the same graph with the LoRA at strength 0. The LoRA's merge
against ComfyUI 0.10.0 is tested in tests/models/test_uso_lora.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from scripts.uso_reference_workflow import tiny_template
from tests.e2e.served import serving
from tests.e2e.test_samplers_on_executors import render_on_server

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "uso_reference"
PROMPT = json.loads(SHIPPED.with_suffix(".json").read_text())


def test_shipped_workflow_is_the_templates_graph() -> None:
    assert json.loads(SHIPPED.with_suffix(".ui.json").read_text()) == tiny_template()
    types = {n["class_type"] for n in PROMPT.values()}
    assert types >= {"LoraLoaderModelOnly", "ReferenceLatent", "FluxKontextMultiReferenceLatentMethod", "KSampler"}
    (sampler,) = [n for n in PROMPT.values() if n["class_type"] == "KSampler"]
    assert PROMPT[sampler["inputs"]["model"][0]]["class_type"] == "LoraLoaderModelOnly"  # through the bypassed ones


def without_lora() -> dict:
    prompt = json.loads(json.dumps(PROMPT))
    (lora,) = [n for n in prompt.values() if n["class_type"] == "LoraLoaderModelOnly"]
    lora["inputs"]["strength_model"] = 0.0
    return prompt


def test_template_in_both_executor_modes(tmp_path) -> None:
    prompts = {"lora": PROMPT, "no_lora": without_lora()}
    workspace = tmp_path / "fresh"
    images = {}
    for mode, flags in (("default", ()), ("in-process", ("--executors", "0"))):
        with serving(workspace, tmp_path / f"{mode}.log", *flags) as base:
            images[mode] = render_on_server(base, prompts, timeout_s=1200)
    for case in prompts:
        default, in_process = images["default"][case], images["in-process"][case]
        assert default.shape == (128, 128, 3) and default.std() > 0
        assert np.array_equal(default, in_process), f"{case}: {int((default != in_process).sum())} values differ"
    assert np.abs(images["default"]["lora"].astype(int) - images["default"]["no_lora"].astype(int)).max() > 10
