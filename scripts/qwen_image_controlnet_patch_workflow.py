"""Write workflows_json/qwen_image_controlnet_patch.ui.json and .json: the web UI's "Qwen-Image DiffSynth ControlNet"
template (image_qwen_image_controlnet_patch of the installed comfyui-workflow-templates-json package) with its own node
graph, the tiny demo files substituted for the downloads (qwen-image-tiny's transformer, text encoder and VAE, the tiny
canny-layout DiffSynth ControlNet of nodes/models/model_patch_demo.py), example.png as its input image scaled to 0.01
megapixels instead of 1.68, a fixed seed and 2 steps. The API format is our UI converter's output.

    python scripts/qwen_image_controlnet_patch_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "image_qwen_image_controlnet_patch"
NAME = "qwen_image_controlnet_patch"
SUBSTITUTE = {
    "UNETLoader": [(0, "qwen_image_tiny.safetensors")],
    "CLIPLoader": [(0, "qwen_2.5_vl_7b_tiny.safetensors")],
    "VAELoader": [(0, "qwen_image_vae_tiny.safetensors")],
    "ModelPatchLoader": [(0, "qwen_image_diffsynth_tiny.safetensors")],
    "LoadImage": [(0, "example.png")],
    "ImageScaleToTotalPixels": [(1, 0.01)],
    "KSampler": [(0, 42), (1, "fixed"), (2, 2)],
}


def tiny_template() -> dict:
    from scripts.workflow_files import tiny_template_ui

    return tiny_template_ui(TEMPLATE, SUBSTITUTE)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
