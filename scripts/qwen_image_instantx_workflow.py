"""Write workflows_json/qwen_image_instantx_inpainting_controlnet.ui.json and .json: the web UI's "Qwen-Image InstantX
Inpainting ControlNet" template (image_qwen_image_instantx_inpainting_controlnet of the installed
comfyui-workflow-templates-json package) with its own node graph (subgraphs unpacked as templates_render unpacks them),
the tiny demo files substituted for the downloads (qwen-image-tiny's transformer, text encoder and VAE, the tiny
InstantX Inpainting ControlNet of nodes/models/qwen_image_controlnet_demo.py), example.png as its input image scaled
to at most 64 pixels instead of 1536, a fixed seed and 2 steps. The API format is our UI converter's output.

    python scripts/qwen_image_instantx_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "image_qwen_image_instantx_inpainting_controlnet"
NAME = "qwen_image_instantx_inpainting_controlnet"
SUBSTITUTE = {  # node type -> (widget index, value), on every node of that type (bypassed ones too)
    "UNETLoader": [(0, "qwen_image_tiny.safetensors")],
    "CLIPLoader": [(0, "qwen_2.5_vl_7b_tiny.safetensors")],
    "VAELoader": [(0, "qwen_image_vae_tiny.safetensors")],
    "ControlNetLoader": [(0, "qwen_image_instantx_inpainting_tiny.safetensors")],
    "LoraLoaderModelOnly": [(0, "qwen_image_edit_tiny_lightning.safetensors")],
    "LoadImage": [(0, "example.png")],
    "ImageScaleToMaxDimension": [(1, 64)],
    "PrimitiveInt": [(0, 64)],
    "KSampler": [(0, 42), (1, "fixed"), (2, 2)],
}


def tiny_template() -> dict:
    from scripts.templates_render import flat_workflow
    from scripts.workflow_files import tiny_template_ui

    return tiny_template_ui(TEMPLATE, SUBSTITUTE, flat_workflow)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
