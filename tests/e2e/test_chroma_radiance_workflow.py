"""The web UI's Chroma1 Radiance text-to-image template (workflows_json/chroma_radiance_text_to_image.json, written
by scripts/chroma_radiance_workflow.py: the template's node graph unpacked from its subgraph, chroma-radiance-tiny and
flux-tiny's T5 substituted, the pixel_space VAE as shipped, 64x64, 2 steps): UNETLoader -> ChromaRadianceOptions ->
ModelSamplingAuraFlow(1), CLIPLoader type chroma -> T5TokenizerOptions -> CLIPTextEncode for both prompts, CFGGuider
3.5, BetaSamplingScheduler, RandomNoise, KSamplerSelect euler, SamplerCustomAdvanced on EmptyChromaRadianceLatentImage,
VAEDecode through VAELoader's pixel_space, SaveImage. From a fresh, empty workspace (serve builds the demo files on its
first start) the image is the same with the default executors and with `--executors 0`, and equals ComfyUI 0.3.64's
image of the same workflow on the same files within 1/255 (recorded by scripts/record_comfyui_chroma_radiance.py)."""

from __future__ import annotations

import json
from pathlib import Path

from scripts.chroma_radiance_workflow import TEMPLATE, tiny_template
from tests.e2e.served import assert_within_1_of_255, comfyui_images, render_in_both_modes

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "chroma_radiance_text_to_image"
FIXTURE = REPO / "tests" / "models" / "fixtures" / "comfyui_chroma_radiance.json"
RECORDED = json.loads(FIXTURE.read_text())["workflow"]


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
    assert default.shape == (64, 64, 3) and default.std() > 0
    (theirs,) = comfyui_images(RECORDED)
    assert_within_1_of_255(default, theirs)
