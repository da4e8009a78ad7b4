"""Write workflows_json/da3_image_depth_estimation.ui.json and .json: the web UI's Depth Anything 3 image depth
template (utility_depth_anything3_image_depth_estimation of the installed comfyui-workflow-templates-json package)
with its own node graph, its subgraph unpacked in place (scripts/qwen_image_edit_workflow.py's `unpacked`), the
tiny DA3 Mono-Large file substituted for depth_anything_3_mono_large (nodes/models/depth_anything3_demo.py) and the
workspace's example.png as its input image. The API format is our UI converter's output.

    python scripts/da3_depth_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "utility_depth_anything3_image_depth_estimation"
NAME = "da3_image_depth_estimation"
SUBSTITUTE = {
    "LoadDA3Model": [(0, "depth_anything_3_mono_large_tiny.safetensors")],
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
