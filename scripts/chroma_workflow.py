"""Write workflows_json/chroma_text_to_image.ui.json and .json: the web UI's "Chroma1-HD text to image" template
(image_chroma_text_to_image of the installed comfyui-workflow-templates-json package) with its own node graph, the
tiny demo files substituted for the downloads (chroma-tiny's transformer for Chroma1-HD-fp8mixed, flux-tiny's T5
and autoencoder for t5xxl_fp8_e4m3fn_scaled and ae), a fixed seed, 64x64 pixels and 2 steps. The API format is our
UI converter's output.

    python scripts/chroma_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "image_chroma_text_to_image"
NAME = "chroma_text_to_image"
SUBSTITUTE = {
    "UNETLoader": [(0, "chroma_tiny.safetensors")],
    "CLIPLoader": [(0, "flux-tiny-t5.safetensors")],
    "VAELoader": [(0, "flux-tiny-ae.safetensors")],
    "RandomNoise": [(0, 42), (1, "fixed")],
    "BasicScheduler": [(1, 2)],
    "EmptySD3LatentImage": [(0, 64), (1, 64)],
}


def tiny_template() -> dict:
    from scripts.workflow_files import tiny_template_ui

    return tiny_template_ui(TEMPLATE, SUBSTITUTE)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
