"""The web UI's "Switch node" template (workflows_json/zimage_lora_switch.json, written by
scripts/zimage_lora_switch_workflow.py: its own graph with the subgraph unpacked, on z-image-turbo-tiny's files and the
tiny Z-Image LoRA in ai-toolkit's layout standing in for its pixel-art LoRA): from a fresh workspace (serve builds the
demo files on its first start) the image is identical with the default executors and with `--executors 0`, with the
switch on as shipped (UNETLoader -> LoraLoaderModelOnly, the LoRA's trigger prompt) and off (the plain model and
prompt), and the two differ. The LoRA's merge against ComfyUI 0.10.0 (every patched weight within 1e-6, the NextDiT's
output) is tested in tests/models/test_zimage_lora.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from scripts.zimage_lora_switch_workflow import tiny_template
from tests.e2e.served import serving
from tests.e2e.test_samplers_on_executors import render_on_server

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "zimage_lora_switch"
PROMPT = json.loads(SHIPPED.with_suffix(".json").read_text())


def test_shipped_workflow_is_the_templates_graph() -> None:
    assert json.loads(SHIPPED.with_suffix(".ui.json").read_text()) == tiny_template()
    assert {n["class_type"] for n in PROMPT.values()} >= {"ComfySwitchNode", "LoraLoaderModelOnly", "UNETLoader"}


def switched_off() -> dict:
    prompt = json.loads(json.dumps(PROMPT))
    (switch,) = [v for v in prompt.values() if v["class_type"] == "PrimitiveBoolean"]
    assert switch["inputs"]["value"] is True
    switch["inputs"]["value"] = False
    return prompt


def test_template_in_both_executor_modes(tmp_path) -> None:
    prompts = {"on": PROMPT, "off": switched_off()}
    workspace = tmp_path / "fresh"
    images = {}
    for mode, flags in (("default", ()), ("in-process", ("--executors", "0"))):
        with serving(workspace, tmp_path / f"{mode}.log", *flags) as base:
            images[mode] = render_on_server(base, prompts, timeout_s=1200)
    for case in prompts:
        default, in_process = images["default"][case], images["in-process"][case]
        assert default.shape == (128, 128, 3) and default.std() > 0
        assert np.array_equal(default, in_process), f"{case}: {int((default != in_process).sum())} values differ"
    assert np.abs(images["default"]["on"].astype(int) - images["default"]["off"].astype(int)).max() > 10
