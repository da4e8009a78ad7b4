"""Write workflows_json/marigold_v2_depth.ui.json and .json: the web UI's "Image Depth Estimation (Marigold V2)"
template (image_marigold_v2_depth_estimation of the installed comfyui-workflow-templates-json package) with its own
node graph, its subgraph unpacked in place (scripts/qwen_image_edit_workflow.py's `unpacked`), the tiny demo files
substituted for the downloads (nodes/models/marigold_demo.py: Qwen-Image-Edit 2509 as an int8 ConvRot file and the
task conditioning; the Qwen-Image family's tiny LoRA and VAE for the task LoRA and VAE) and the workspace's
example.png as its input image. The API format is our UI converter's output.

    python scripts/marigold_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "image_marigold_v2_depth_estimation"
NAME = "marigold_v2_depth"
SUBSTITUTE = {
    "UNETLoader": [(0, "qwen_image_edit_2509_int8_convrot_tiny.safetensors")],
    "LoraLoaderModelOnly": [(0, "qwen_image_edit_tiny_lightning.safetensors")],
    "VAELoader": [(0, "qwen_image_vae_tiny.safetensors")],
    "ConditioningLoader": [(0, "marigold_v2_conditioning_tiny.safetensors")],
    "LoadImage": [(0, "example.png")],
}


def tiny_template() -> dict:
    from scripts.qwen_image_edit_workflow import unpacked
    from scripts.workflow_files import tiny_template_ui

    return tiny_template_ui(TEMPLATE, SUBSTITUTE, unpacked)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
