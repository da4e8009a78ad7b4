"""Write workflows_json/mage_flow_turbo_t2i(.ui).json and mage_flow_edit(.ui).json: the web UI's "Mage-Flow Turbo"
text-to-image template (image_mage_flow_turbo_t2i_int8) and its "Mage-Flow-Edit" image edit template
(image_mage_flow_edit_int8) of the installed comfyui-workflow-templates-json package, each with its own node graph,
its subgraph unpacked in place by the templates renderer's unpacker (scripts/templates_render.py), the tiny demo
files substituted for the downloads (mage-flow-tiny's DiT and VAE, qwen-image-2.1-tiny's Qwen3-VL for the
Qwen3-VL-4B), a fixed seed, and the sizes shrunk: ResolutionSelector at 0.1 megapixels, its least, with its minimum side 256
(t2i: 320x320), the edit picture the
workspace's example.png scaled by ImageScaleToTotalPixels to 0.02 megapixels (as shipped, the output matches it).
Everything else is as shipped: t2i 4 euler/simple steps at cfg 1, edit 30 steps at cfg 5 with the empty negative
prompt. The API format is our UI converter's output.

    python scripts/mage_flow_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TINY = {
    "UNETLoader": [(0, "mage_flow_tiny.safetensors")],
    "CLIPLoader": [(0, "qwen3vl_8b_tiny.safetensors")],
    "VAELoader": [(0, "mage_flow_vae_tiny.safetensors")],
    "KSampler": [(0, 42), (1, "fixed")],
    "LoadImage": [(0, "example.png")],
    "ResolutionSelector": [(1, 0.1), (3, 256)],  # its least megapixels; `minimum`, which the template predates
    "ImageScaleToTotalPixels": [(1, 0.02)],
}
WORKFLOWS = {"mage_flow_turbo_t2i": "image_mage_flow_turbo_t2i_int8", "mage_flow_edit": "image_mage_flow_edit_int8"}


def tiny_template(template: str) -> dict:
    from scripts.templates_render import flat_workflow
    from scripts.workflow_files import substituted, template_ui

    ui = template_ui(template)
    for sg in ui["definitions"]["subgraphs"]:  # the subgraph's own nodes hold the values its instance shows
        substituted(sg, TINY)
    (outer,) = [n for n in ui["nodes"] if n["type"] == ui["definitions"]["subgraphs"][0]["id"]]
    names = [i["name"] for i in ui["definitions"]["subgraphs"][0]["inputs"] if i["type"] != "IMAGE"]
    values = outer["widgets_values"]
    for name, value in (("seed", 42), ("unet_name", TINY["UNETLoader"][0][1]), ("clip_name", TINY["CLIPLoader"][0][1])):
        if name in names and len(values) > names.index(name):  # promoted values saved on the instance
            values[names.index(name)] = value
    if "vae_name" in names and len(values) > names.index("vae_name"):
        values[names.index("vae_name")] = TINY["VAELoader"][0][1]
    return substituted(flat_workflow(ui), TINY)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    registry = workspace_registry(sys.argv[1])
    for name, template in WORKFLOWS.items():
        write_workflow(name, tiny_template(template), registry)


if __name__ == "__main__":
    main()
