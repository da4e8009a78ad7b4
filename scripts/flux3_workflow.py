"""Write workflows_json/flux3_klein_t2i{,.ui}.json, flux3_klein_distilled_t2i{,.ui}.json,
flux3_klein_image_edit{,.ui}.json and flux3_klein_distilled_image_edit{,.ui}.json.

flux3_klein_t2i: the web UI's "FLUX 3 Image Klein" text-to-image template
(image_flux3_klein_t2i of the installed comfyui-workflow-templates-json package, the most used FLUX 3 template)
with its own node graph, its subgraph unpacked in place as scripts/krea2_workflow.py does it, the tiny demo files
substituted for the downloads (flux3-tiny's transformer and Qwen3-VL, flux2-klein-tiny's VAE), the subgraph's
promoted widget values of the template put on the inner widgets (its prompt, empty negative prompt, cfg 3.5,
euler, simple) with a fixed seed, 8 steps instead of 50 and 0.1 megapixels. Left as the template has them: the
layout branch (Create Bounding Boxes with no boxes -> FLUX 3 Image Layout Prompt -> Preview Any). Changed: the
prompt upsampler's switch is off (TextGenerate on FLUX 3's Qwen3.5-9B upsampler is not supported), so its
TextGenerate and CLIPLoader are only validated: the tiny Qwen3-VL's name stands in for the upsampler's file.

flux3_klein_distilled_t2i: the step-distilled text-to-image template (image_flux3_klein_distilled_t2i) likewise,
its flow-map model flux3-tiny's distilled one, at the template's cfg 1 and 8 steps instead of 16.

flux3_klein_image_edit: the image-edit template (image_flux3_klein_image_edit, the second most used; a flat graph)
with the same files, the new workspace's input/example.png (128x128) for its photo, a fixed seed, 8 steps instead
of 50 at its cfg 1, Set Reference Multi Latent at "keep resolution" instead of 1 megapixel, and its switch set to
take the layout prompt (FLUX 3 Image Layout Prompt over the template's one drawn box) instead of the upsampler.
Its Image Compare takes the decoded images from VAE Decode instead of from Save Image's IMAGE output (today's
ComfyUI passes the saved images through; this SaveImage keeps 0.3.64's interface, without outputs).

flux3_klein_distilled_image_edit: the step-distilled image-edit template (image_flux3_klein_distilled_image_edit)
with the same changes (8 steps instead of 16), its flow-map model flux3-tiny's distilled one.

The API format is our UI converter's output.

    python scripts/flux3_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "image_flux3_klein_t2i"
NAME = "flux3_klein_t2i"
TEXT_ENCODER = "qwen3vl_4b_flux3_tiny.safetensors"
SEED = 42
STEPS = 8
# inner node id -> [(widget index, value)]; the template's promoted values first, then the tiny run's
INNER = {
    1: [(0, "flux3_klein_tiny.safetensors")],  # UNETLoader
    2: [(0, TEXT_ENCODER)],  # CLIPLoader flux3 (the encoder)
    12: [(0, TEXT_ENCODER)],  # CLIPLoader flux3 (the upsampler; not loaded with the switch off)
    3: [(0, "flux2-klein-tiny-vae.safetensors")],  # VAELoader
    7: [(0, SEED), (1, "fixed"), (2, STEPS), (3, 3.5), (4, "euler"), (5, "simple")],  # KSampler
    16: [(0, False)],  # ComfySwitchNode: the prompt upsampler off
    5: [(0, "")],  # the negative prompt (the subgraph's `text`)
}
OUTER = {"ResolutionSelector": [(1, 0.1), (3, 256)]}
PROMPT_INPUT, PROMPT_NODE = "value", 17  # the subgraph's prompt feeds PrimitiveStringMultiline 17's widget


DISTILLED_TEMPLATE = "image_flux3_klein_distilled_t2i"
DISTILLED_NAME = "flux3_klein_distilled_t2i"
# the step-distilled model at the template's cfg 1 (its KSampler's own; no cfg is promoted), euler/simple
DISTILLED_INNER = {
    **INNER,
    1: [(0, "flux3_klein_distilled_tiny.safetensors")],
    7: [(0, SEED), (1, "fixed"), (2, STEPS), (3, 1.0), (4, "euler"), (5, "simple")],
}


def tiny_template(template: str = TEMPLATE, inner_values: dict = INNER) -> dict:
    from scripts.qwen_image21_workflow import _bypass_preview_outputs
    from scripts.qwen_image_edit_workflow import unpacked
    from scripts.templates_coverage import templates_dir

    workflow = json.loads((templates_dir() / f"{template}.json").read_text())
    (sg,) = workflow["definitions"]["subgraphs"]
    (outer,) = [n for n in workflow["nodes"] if n["type"] == sg["id"]]
    prompt = outer["widgets_values"][[i["name"] for i in sg["inputs"]].index(PROMPT_INPUT)]
    inner = {n["id"]: n for n in sg["nodes"]}
    inner[PROMPT_NODE]["widgets_values"][0] = prompt
    for node_id, values in inner_values.items():
        for index, value in values:
            inner[node_id]["widgets_values"][index] = value
    for node in workflow["nodes"]:
        for index, value in OUTER.get(node["type"], []):
            node["widgets_values"][index : index + 1] = [value]  # index == len: a widget the template predates
    flat = unpacked(workflow)
    _bypass_preview_outputs(flat)
    return flat


EDIT_TEMPLATE = "image_flux3_klein_image_edit"
EDIT_NAME = "flux3_klein_image_edit"
EDIT = {
    "UNETLoader": [(0, "flux3_klein_tiny.safetensors")],
    "CLIPLoader": [(0, TEXT_ENCODER)],  # the encoder, and the upsampler's (not loaded: the switch skips it)
    "VAELoader": [(0, "flux2-klein-tiny-vae.safetensors")],
    "KSampler": [(0, SEED), (1, "fixed"), (2, STEPS)],
    "LoadImage": [(0, "example.png")],
    "ReferenceMultiLatent": [(0, "keep resolution"), (1, None)],  # None: the option's megapixels widget goes
    "ComfySwitchNode": [(0, True)],  # on_true: the layout prompt as typed; on_false: the upsampler's text
}


DISTILLED_EDIT_TEMPLATE = "image_flux3_klein_distilled_image_edit"
DISTILLED_EDIT_NAME = "flux3_klein_distilled_image_edit"
DISTILLED_EDIT = {**EDIT, "UNETLoader": [(0, "flux3_klein_distilled_tiny.safetensors")]}


def tiny_edit_template(template: str = EDIT_TEMPLATE, substitute: dict = EDIT) -> dict:
    from scripts.qwen_image21_workflow import _bypass_preview_outputs
    from scripts.templates_coverage import templates_dir

    workflow = json.loads((templates_dir() / f"{template}.json").read_text())
    for node in workflow["nodes"]:
        values = node.get("widgets_values")
        for index, value in substitute.get(node["type"], []):
            values[index] = value
        if isinstance(values, list) and None in values:
            node["widgets_values"] = [v for v in values if v is not None]
    _bypass_preview_outputs(workflow)
    _compare_from_decode(workflow)
    return workflow


def _compare_from_decode(workflow: dict) -> None:
    """Links out of SaveImage start at the VAE Decode that feeds it (the same images) instead."""
    nodes = {n["id"]: n for n in workflow["nodes"]}
    links = {l[0]: l for l in workflow["links"]}
    for node in workflow["nodes"]:
        if node["type"] != "SaveImage" or not node.get("outputs") or not node["outputs"][0].get("links"):
            continue
        feed = links[node["inputs"][0]["link"]]
        for lid in node["outputs"][0]["links"]:
            links[lid][1], links[lid][2] = feed[1], feed[2]
            nodes[feed[1]]["outputs"][feed[2]]["links"].append(lid)
        node["outputs"][0]["links"] = []


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    registry = workspace_registry(sys.argv[1])
    write_workflow(NAME, tiny_template(), registry)
    write_workflow(DISTILLED_NAME, tiny_template(DISTILLED_TEMPLATE, DISTILLED_INNER), registry)
    write_workflow(EDIT_NAME, tiny_edit_template(), registry)
    write_workflow(DISTILLED_EDIT_NAME, tiny_edit_template(DISTILLED_EDIT_TEMPLATE, DISTILLED_EDIT), registry)


if __name__ == "__main__":
    main()
