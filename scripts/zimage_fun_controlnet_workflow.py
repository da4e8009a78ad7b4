"""Write workflows_json/zimage_fun_controlnet.ui.json and .json: the web UI's "Z-Image-Turbo Fun Union ControlNet"
template (image_z_image_turbo_fun_union_controlnet of the installed comfyui-workflow-templates-json package) with its
own node graph (its subgraph unpacked as the web UI queues it), the tiny demo files substituted for the downloads (z-image-turbo-tiny's transformer, Qwen3
text encoder and autoencoder, the tiny Fun ControlNet of nodes/models/model_patch_demo.py), example.png (128 x 128)
as its input image (the template's scaling node stays bypassed, as shipped; the latent takes the image's size), a
fixed seed and 2 steps.
The API format is our UI converter's output.

    python scripts/zimage_fun_controlnet_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "image_z_image_turbo_fun_union_controlnet"
NAME = "zimage_fun_controlnet"
SUBSTITUTE = {
    "UNETLoader": [(0, "z-image-turbo-tiny.safetensors")],
    "CLIPLoader": [(0, "qwen_3_4b-tiny.safetensors")],
    "VAELoader": [(0, "z-image-turbo-tiny-ae.safetensors")],
    "ModelPatchLoader": [(0, "z_image_turbo_fun_controlnet_union_tiny.safetensors")],
    "LoadImage": [(0, "example.png")],
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
