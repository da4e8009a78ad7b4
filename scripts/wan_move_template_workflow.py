"""Write workflows_json/wan_move_template.ui.json and .json: the web UI's "Wan Move" template (video_wanmove_480p of
the installed comfyui-workflow-templates-json package) with its own node graph, the tiny demo files put in place of
the downloads by the templates renderer's rules (the tiny Wan 2.1 image-to-video model for the Wan-Move file, the
tiny i2v LoRA for lightx2v's, umT5, CLIP vision, the Wan 2.1 VAE) and the workspace's example.png as the start
picture. Changed besides: the picture scaled to 64x48 instead of 832x480 and the three GenerateTracks drawn on 64x48
instead of 720x480 (the same fractions of the picture), 9 frames instead of 81, 2 steps instead of 20 (and of the
LoRA's 6) and the seed fixed. As shipped otherwise: the three sets of tracks joined by two WanMoveConcatTrack,
strength 1, the LoRA switch off (so no LoRA and cfg 6), shift 8, er_sde, CreateVideo at 16 fps, SaveVideo; the
preview of the tracks (WanMoveVisualizeTracks) and WanMoveTracksFromCoords stay bypassed as shipped.

    python scripts/wan_move_template_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "video_wanmove_480p"
NAME = "wan_move_template"
WIDTH, HEIGHT, FRAMES, STEPS, SEED = 64, 48, 9, 2, 42
# node id (after unpacking) -> {widget index: value}
WIDGETS = {
    4: {1: WIDTH, 2: HEIGHT},  # ImageScale's width and height (832x480): WanMoveTrackToVideo reads them
    **{tracks: {0: WIDTH, 1: HEIGHT, 6: FRAMES} for tracks in (6, 7, 8)},  # GenerateTracks' 720x480 and 81 frames
    29: {3: FRAMES},  # WanMoveTrackToVideo's length (81)
    28: {0: SEED, 1: "fixed"},  # KSampler's seed (increment)
    **{steps: {0: STEPS} for steps in (34, 36)},  # the step counts with (6) and without (20) the LoRA
}


def tiny_template() -> dict:
    from scripts.workflow_files import tiny_flat_template

    return tiny_flat_template(TEMPLATE, WIDGETS)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
