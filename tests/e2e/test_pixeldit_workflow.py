"""The web UI's PixelDiT text-to-image template (workflows_json/pixeldit_t2i.json, written by
scripts/pixeldit_workflow.py: the template's node graph unpacked from its subgraph, pixeldit-tiny and its tiny
Gemma 2 substituted, the pixel_space VAE as shipped, ResolutionSelector's 0.1 megapixels, 2 steps): UNETLoader,
CLIPLoader type pixeldit -> CLIPTextEncode for both prompts, EmptyChromaRadianceLatentImage sized by
ResolutionSelector, KSampler er_sde / simple at cfg 4, VAEDecode through VAELoader's pixel_space, SaveImage. From a
fresh, empty workspace (serve builds the demo files on its first start) the image is the same with the default
executors and with `--executors 0`, and equals the image of the newest ComfyUI's PixelDiT code on 0.10.0's nodes and
samplers within 1/255 (recorded by scripts/record_comfyui_pixeldit.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from scripts.pixeldit_workflow import TEMPLATE, tiny_template
from tests.e2e.served import assert_within_1_of_255_of_record, render_with_serve
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "pixeldit_t2i"
FIXTURE = REPO / "tests" / "models" / "fixtures" / "comfyui_pixeldit.json.xz"
RECORDED = load_json(FIXTURE)["workflow"]


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
    workspace = tmp_path / "fresh"
    default = render_with_serve(workspace, tmp_path / "default.log", prompt)
    in_process = render_with_serve(workspace, tmp_path / "executors0.log", prompt, "--executors", "0")
    assert default.shape == (320, 320, 3) and default.std() > 0
    assert np.array_equal(default, in_process), (
        f"{int((default != in_process).sum())} values differ between the executor modes"
    )
    (png,) = RECORDED["pngs_rgb"]
    assert_within_1_of_255_of_record(default, png)
