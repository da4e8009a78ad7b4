"""Write workflows_json/wan_infinitetalk_template.ui.json and .json: the web UI's InfiniteTalk template
(video_wan2_1_infinitetalk of the installed comfyui-workflow-templates-json package) with its own node graph, its two
"InfiniteTalk (Base Generation)" subgraphs unpacked by the templates renderer's unpacker (scripts/templates_render.py),
the tiny demo files put in place of the downloads by the renderer's rules (the two-head Wan 2.1 I2V file, the
InfiniteTalk patch, the wav2vec 2.0 encoder, the lightx2v LoRA, umT5, the Wan 2.1 VAE), the picture the workspace's
example.png and both speakers' sounds its example.wav. Changed besides: 64x64 instead of 832x480 (and the Painter
masks), clips of 9 frames instead of 81, 2 steps instead of 6 and both seeds fixed. As shipped otherwise: two
speakers with their masks, the LoRA, cfg 1, the base clip and one extension from its last 9 frames, CreateVideo with
the joined sound at 25 fps, today's SaveVideo.

    python scripts/wan_infinitetalk_template_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "video_wan2_1_infinitetalk"
NAME = "wan_infinitetalk_template"
SIDE = 64
FRAMES = 9
# node id (after unpacking) -> {widget index: value}
WIDGETS = {
    5: {0: SIDE},  # the width primitive (832)
    6: {0: SIDE},  # the height primitive (480)
    17: {1: SIDE, 2: SIDE},  # the speakers' Painter masks (1216 x 960)
    18: {1: SIDE, 2: SIDE},
    23: {1: SIDE, 2: SIDE, 3: FRAMES},  # WanInfiniteTalkToVideo's width, height (linked) and length (81)
    39: {1: SIDE, 2: SIDE, 3: FRAMES},
    33: {1: 2},  # the steps (6)
    49: {1: 2},
    34: {1: "fixed"},  # the seeds (randomize)
    50: {1: "fixed"},
}


def tiny_template() -> dict:
    from scripts.workflow_files import tiny_flat_template

    return tiny_flat_template(TEMPLATE, WIDGETS)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
