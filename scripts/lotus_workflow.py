"""Write workflows_json/lotus_depth.ui.json and .json: the web UI's "Lotus depth" template (image_lotus_depth_v1_1 of
the installed comfyui-workflow-templates-json package) with its own node graph, its subgraph unpacked in place (scripts/qwen_image_edit_workflow.py's `unpacked`), the tiny demo files
substituted for the downloads (lotus-depth-d-v1-1_tiny for lotus-depth-d-v1-1, sd1-tiny-vae for
vae-ft-mse-840000-ema-pruned) and the workspace's example.png as its input image. The API format is our UI
converter's output.

    python scripts/lotus_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "image_lotus_depth_v1_1"
NAME = "lotus_depth"
SUBSTITUTE = {
    "UNETLoader": [(0, "lotus-depth-d-v1-1_tiny.safetensors")],
    "VAELoader": [(0, "sd1-tiny-vae.safetensors")],
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
