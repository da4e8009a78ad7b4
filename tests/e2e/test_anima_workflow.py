"""The web UI's Anima Base v1.0 template (workflows_json/anima_base_v1.json, written by scripts/anima_workflow.py:
the template's node graph unpacked from its subgraph, anima-tiny's transformer and Qwen3 0.6B and qwen-image-tiny's
VAE substituted, 0.1 megapixels, 3 steps): UNETLoader through the turbo-LoRA switch (off as shipped), CLIPLoader
stable_diffusion -> CLIPTextEncode for both prompts, EmptyLatentImage from ResolutionSelector, KSampler euler/simple
cfg 4, VAEDecode, SaveImage. From a fresh, empty workspace (serve builds the demo files on its first start) the image
is the same with the default executors and with `--executors 0`, and equals upstream ComfyUI 0.10.0's image of the
same workflow on the same files within 1/255 (recorded by scripts/record_comfyui_anima.py)."""

from __future__ import annotations

import json
from pathlib import Path

from scripts.anima_workflow import TEMPLATE, tiny_template
from tests.e2e.served import assert_within_1_of_255_of_record, render_in_both_modes
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "anima_base_v1"
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_anima.json.xz")["workflow"]


def test_shipped_workflows_are_the_templates_graph_and_the_recorded_one() -> None:
    from scripts.templates_coverage import templates_dir

    template = json.loads((templates_dir() / f"{TEMPLATE}.json").read_text())
    ids = {sg["id"] for sg in template["definitions"]["subgraphs"]}
    inner = [n["type"] for sg in template["definitions"]["subgraphs"] for n in sg["nodes"]]
    outer = [n["type"] for n in template["nodes"] if n["type"] not in ids]
    ui = json.loads(SHIPPED.with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    assert sorted(n["type"] for n in ui["nodes"]) == sorted(inner + outer)
    assert RECORDED["prompt"] == json.loads(SHIPPED.with_suffix(".json").read_text())


def test_template_in_both_executor_modes_equals_comfyuis(tmp_path) -> None:
    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    default = render_in_both_modes(tmp_path, prompt)
    assert default.shape == (320, 320, 3) and default.std() > 0
    (png,) = RECORDED["pngs_rgb"]
    assert_within_1_of_255_of_record(default, png)
