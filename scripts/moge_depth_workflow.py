"""Write workflows_json/moge_depth_estimation.ui.json and .json: the web UI's MoGe depth estimation template
(utility_moge_depth_estimation of the installed comfyui-workflow-templates-json package) with its own node graph, its
subgraph unpacked in place (scripts/qwen_image_edit_workflow.py's `unpacked`), the tiny MoGe-2 file substituted for
moge_2_vitl_normal_fp16 (nodes/models/moge_demo.py) and the workspace's example.png as its input image. The API
format is our UI converter's output.

    python scripts/moge_depth_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "utility_moge_depth_estimation"
NAME = "moge_depth_estimation"
SUBSTITUTE = {
    "LoadMoGeModel": [(0, "moge_2_vitl_normal_tiny.safetensors")],
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
