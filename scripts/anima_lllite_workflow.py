"""Write workflows_json/anima_lllite_inpainting.ui.json and .json: the web UI's "Anima LLLite image inpainting"
template (image_anima_lllite_image_inpainting of the installed comfyui-workflow-templates-json package) with its own
node graph, its subgraph unpacked in place (scripts/qwen_image_edit_workflow.py's `unpacked`), the tiny demo files
substituted for the downloads (anima-tiny's transformer, Qwen3 0.6B and turbo LoRA, qwen-image-tiny's VAE, the tiny
inpainting LLLite), a fixed seed, 64x64 and 3 steps (the turbo branch, on as shipped: 2 steps at cfg 1). LoadImage
reads the workspace's example.png; the Painter reads its example_painting.png (a white disc on a transparent canvas:
the file the web UI uploads when one paints; demo-models writes it), and its mask reaches AnimaLLLiteApply through
MaskPreview's output as in the template. The template's ImageCompare and its unconnected ResizeImageMaskNode are left
out, so SaveImage is the one image output. The API format is our UI converter's output.

    python scripts/anima_lllite_workflow.py
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts.templates_render import PAINTING  # noqa: E402

TEMPLATE = "image_anima_lllite_image_inpainting"
NAME = "anima_lllite_inpainting"
OUT = REPO / "workflows_json" / NAME
SUBSTITUTE = {
    "UNETLoader": [(0, "anima_tiny.safetensors")],
    "CLIPLoader": [(0, "qwen_3_06b_base_tiny.safetensors")],
    "VAELoader": [(0, "qwen_image_vae_tiny.safetensors")],
    "ModelPatchLoader": [(0, "anima_lllite_inpainting_tiny.safetensors")],
    "LoraLoaderModelOnly": [(0, "anima_turbo_lora_tiny.safetensors")],
    "KSampler": [(0, 42), (1, "fixed")],
    "EmptyLatentImage": [(0, 64), (1, 64)],
    "LoadImage": [(0, "example.png")],
    "Painter": [(0, PAINTING), (1, 64), (2, 64)],
}
LEFT_OUT = {"ImageCompare", "ResizeImageMaskNode"}
STEPS = {30: 3, 8: 2}  # the template's step primitives (base, turbo) -> tiny counts


def tiny_template() -> dict:
    from scripts.qwen_image_edit_workflow import unpacked
    from scripts.workflow_files import tiny_template_ui

    flat = tiny_template_ui(TEMPLATE, SUBSTITUTE, unpacked)
    gone = {n["id"] for n in flat["nodes"] if n["type"] in LEFT_OUT}
    dropped = {link[0] for link in flat["links"] if link[1] in gone or link[3] in gone}
    flat["nodes"] = [n for n in flat["nodes"] if n["id"] not in gone]
    flat["links"] = [link for link in flat["links"] if link[0] not in dropped]
    for node in flat["nodes"]:
        for out in node.get("outputs") or []:
            if out.get("links"):
                out["links"] = [i for i in out["links"] if i not in dropped]
        if node["type"] == "PrimitiveInt" and node["widgets_values"][0] in STEPS:
            node["widgets_values"][0] = STEPS[node["widgets_values"][0]]
    return flat


def builtin_registry():
    """The builtin node registry (no workspace, no node packs): what the API file is converted with."""
    from comfy_bridge.registry import build_registry

    return build_registry(None, load_custom_nodes=False)


def main() -> None:
    from scripts.workflow_files import write_workflow

    write_workflow(NAME, tiny_template(), builtin_registry())


if __name__ == "__main__":
    main()
