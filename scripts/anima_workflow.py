"""Write workflows_json/anima_base_v1.ui.json and .json: the web UI's "Anima Base v1.0" text-to-image template
(image_anima_base_v1 of the installed comfyui-workflow-templates-json package) with its own node graph, its subgraph
unpacked in place (scripts/qwen_image_edit_workflow.py's `unpacked`), the tiny demo files substituted for the
downloads (anima-tiny's transformer and Qwen3 0.6B, qwen-image-tiny's VAE), a fixed seed, 0.1 megapixels
(ResolutionSelector's `minimum` widget filled) and 3 steps (the turbo branch's 2). The turbo LoRA stays off as shipped, so its LoraLoaderModelOnly is only validated:
a demo LoRA's name stands in for anima-turbo-lora. The API format is our UI converter's output.

    python scripts/anima_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "image_anima_base_v1"
NAME = "anima_base_v1"
SUBSTITUTE = {
    "UNETLoader": [(0, "anima_tiny.safetensors")],
    "CLIPLoader": [(0, "qwen_3_06b_base_tiny.safetensors")],
    "VAELoader": [(0, "qwen_image_vae_tiny.safetensors")],
    "LoraLoaderModelOnly": [(0, "qwen_image_edit_tiny_lightning.safetensors")],
    "KSampler": [(0, 42), (1, "fixed")],
    "ResolutionSelector": [(1, 0.1), (3, 256)],  # `minimum`: a widget the saved template predates
}
STEPS = {30: 3, 8: 2}  # the template's step primitives (base, turbo) -> tiny counts


def tiny_template() -> dict:
    from scripts.qwen_image_edit_workflow import unpacked
    from scripts.workflow_files import tiny_template_ui

    flat = tiny_template_ui(TEMPLATE, SUBSTITUTE, unpacked)
    for node in flat["nodes"]:
        if node["type"] == "PrimitiveInt" and node["widgets_values"][0] in STEPS:
            node["widgets_values"][0] = STEPS[node["widgets_values"][0]]
    return flat


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
