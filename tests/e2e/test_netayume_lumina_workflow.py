"""The web UI's NetaYume Lumina template (workflows_json/netayume_lumina_t2i.json, written by
scripts/lumina2_workflow.py: the template's node graph with its two levels of subgraphs unpacked, the tiny all-in-one
checkpoint netayume-lumina-tiny substituted, 64x48, 3 steps): CheckpointLoaderSimple -> ModelSamplingAuraFlow 4,
the system-prompt and user-prompt primitives joined by StringConcatenate into CLIPTextEncode for both prompts,
EmptySD3LatentImage, KSampler res_multistep/simple cfg 4, VAEDecode, SaveImage. From a fresh, empty workspace
(serve builds the demo files on its first start) the image is the same with the default executors and with
`--executors 0`, and equals ComfyUI 0.3.64's image of the same workflow on the same file within 1/255 (recorded by
scripts/record_comfyui_lumina2.py)."""

from __future__ import annotations

import json
from pathlib import Path

from scripts.lumina2_workflow import TEMPLATE, tiny_template
from tests.e2e.served import assert_within_1_of_255, comfyui_images, render_in_both_modes

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "workflows_json" / "netayume_lumina_t2i"
RECORDED = json.loads((REPO / "tests" / "models" / "fixtures" / "comfyui_lumina2.json").read_text())["workflow"]


def test_shipped_workflows_are_the_templates_graph_and_the_recorded_one() -> None:
    from scripts.templates_coverage import templates_dir

    template = json.loads((templates_dir() / f"{TEMPLATE}.json").read_text())
    ids = {sg["id"] for sg in template["definitions"]["subgraphs"]}
    every = [n["type"] for n in template["nodes"]] + [
        n["type"] for sg in template["definitions"]["subgraphs"] for n in sg["nodes"]
    ]
    ui = json.loads(SHIPPED.with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    assert sorted(n["type"] for n in ui["nodes"]) == sorted(t for t in every if t not in ids)
    assert RECORDED["prompt"] == json.loads(SHIPPED.with_suffix(".json").read_text())


def test_template_in_both_executor_modes_equals_comfyuis(tmp_path) -> None:
    prompt = json.loads(SHIPPED.with_suffix(".json").read_text())
    default = render_in_both_modes(tmp_path, prompt)
    assert default.shape == (48, 64, 3) and default.std() > 0
    (theirs,) = comfyui_images(RECORDED)
    assert_within_1_of_255(default, theirs)
