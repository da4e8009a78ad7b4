"""Write workflows_json/sdxl_revision_text_prompts.ui.json and .json: the web UI's SDXL Revision template
(sdxl_revision_text_prompts of the installed comfyui-workflow-templates-json package: two images through
CLIPVisionEncode and chained unCLIPConditioning on the text prompt, KSampler) with its own node graph, the tiny demo
files substituted for the downloads (sdxl-revision-tiny for sd_xl_base_1.0, clip-vision-g-tiny for clip_vision_g),
the workspace's example.png for both reference images, a fixed seed, 128 pixels and 3 steps. The API format is our
UI converter's output.

    python scripts/sdxl_revision_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "sdxl_revision_text_prompts"
NAME = "sdxl_revision_text_prompts"
SUBSTITUTE = {
    "CheckpointLoaderSimple": [(0, "sdxl-revision-tiny.safetensors")],
    "CLIPVisionLoader": [(0, "clip-vision-g-tiny.safetensors")],
    "LoadImage": [(0, "example.png")],
    "EmptyLatentImage": [(0, 128), (1, 128)],
    "KSampler": [(0, 42), (1, "fixed"), (2, 3)],
}


def tiny_template() -> dict:
    from scripts.workflow_files import tiny_template_ui

    return tiny_template_ui(TEMPLATE, SUBSTITUTE)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
