"""Write workflows_json/pixeldit_t2i.ui.json and .json: the web UI's "PixelDiT text to image" template
(image_pixeldit_t2i of the installed comfyui-workflow-templates-json package) with its own node graph, its subgraph
unpacked in place (scripts/qwen_image_edit_workflow.py's `unpacked`), the tiny demo files substituted for the
downloads (pixeldit-tiny for pixeldit_1300m_1024px_bf16, its tiny Gemma 2 for gemma_2_2b_it_elm_bf16; the VAE is
ComfyUI's file-less pixel_space as shipped), a fixed seed, 2 steps and ResolutionSelector's smallest size
(0.1 megapixels: 320x320 at 1:1; its `multiple` and `minimum` widgets, newer than the saved template, at their
defaults as the web UI fills them).

    python scripts/pixeldit_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "image_pixeldit_t2i"
NAME = "pixeldit_t2i"
SUBSTITUTE = {
    "UNETLoader": [(0, "pixeldit_tiny.safetensors")],
    "CLIPLoader": [(0, "gemma_2_2b_it_elm_tiny.safetensors")],
    "KSampler": [(0, 42), (1, "fixed"), (2, 2)],
    # `multiple` and `minimum`: widgets the saved template predates, at the defaults the web UI fills in
    "ResolutionSelector": [(1, 0.1), (2, 8), (3, 256)],
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
