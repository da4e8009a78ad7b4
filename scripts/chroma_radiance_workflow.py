"""Write workflows_json/chroma_radiance_text_to_image.ui.json and .json: the web UI's "Chroma1 Radiance text to
image" template (image_chroma1_radiance_text_to_image of the installed comfyui-workflow-templates-json package) with
its own node graph, its subgraph unpacked in place (scripts/qwen_image_edit_workflow.py's `unpacked`), the tiny demo
files substituted for the downloads (chroma-radiance-tiny for chroma-radiance-x0, flux-tiny's T5 for
t5xxl_fp8_e4m3fn_scaled; the VAE is ComfyUI's file-less pixel_space as shipped), a fixed seed, 64x64 pixels and
2 steps. The API format is our UI converter's output.

    python scripts/chroma_radiance_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "image_chroma1_radiance_text_to_image"
NAME = "chroma_radiance_text_to_image"
SUBSTITUTE = {
    "UNETLoader": [(0, "chroma_radiance_tiny.safetensors")],
    "CLIPLoader": [(0, "flux-tiny-t5.safetensors")],
    "RandomNoise": [(0, 42), (1, "fixed")],
    "BetaSamplingScheduler": [(0, 2)],
    "EmptyChromaRadianceLatentImage": [(0, 64), (1, 64)],
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
