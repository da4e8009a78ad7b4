"""Write workflows_json/frame_interpolation_template.ui.json and .json: the web UI's "Frame Interpolation" template
(utility_video_frame_interpolation of the installed comfyui-workflow-templates-json package) with its own node graph,
its subgraph unpacked, the demo FILM file (full size, seeded: nodes/models/frame_interpolation_demo.py) at the
template's name and the workspace's example.mp4 (64x64, 9 frames) as the clip. As shipped otherwise: multiplier 2,
the frame rate multiplied with it, CreateVideo and SaveVideo.

    python scripts/frame_interpolation_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "utility_video_frame_interpolation"
NAME = "frame_interpolation_template"


def tiny_template() -> dict:
    from scripts.workflow_files import tiny_flat_template

    return tiny_flat_template(TEMPLATE, {})


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
