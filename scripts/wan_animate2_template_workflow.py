"""Write workflows_json/wan_animate2_template.ui.json and .json: the web UI's "Wan Animate 2" template
(video_wan_animate2 of the installed comfyui-workflow-templates-json package) with its own node graph, its
subgraphs unpacked by the templates renderer's unpacker (scripts/templates_render.py), the tiny demo files put in
place of the downloads by the renderer's rules (the tiny Animate 2 file, its i2v LoRA, umT5, CLIP vision and the
Wan 2.1 VAE), the reference picture the workspace's example.png and the pose video its example.mp4 (9 frames at
16 fps). Changed besides: the pose video is resized to 64x64 (the template's 482x854 primitives), 2 steps instead
of 6 and the noise seed fixed. As shipped otherwise: WanAnimate2Cache at int8, the Start/End Loop over fragments
of the pose video (one fragment here) with its math, continue_motion and the tail trim, TrimVideoLatent, LCM,
the side-by-side preview video (ImageStitch of the pose and reference), CreateVideo and both SaveVideos.

    python scripts/wan_animate2_template_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "video_wan_animate2"
NAME = "wan_animate2_template"
SEED = 42
SIDE = 64
# node id (after unpacking) -> {widget index: value}
WIDGETS = {
    40: {0: SIDE},  # the pose video's width and height primitives (482, 854)
    41: {0: SIDE},
    38: {1: SIDE, 2: SIDE},  # the Resize Image/Mask they feed
    73: {1: 2},  # BasicScheduler's steps (6)
    79: {1: SEED, 2: "fixed"},  # SamplerCustom's noise seed
}


def tiny_template() -> dict:
    from scripts.workflow_files import tiny_flat_template

    return tiny_flat_template(TEMPLATE, WIDGETS)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
