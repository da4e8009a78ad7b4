"""Write workflows_json/wan_humo_template.ui.json and .json: the web UI's "HuMo" template (video_humo of the installed
comfyui-workflow-templates-json package) with its own node graph, the tiny demo files put in place of the downloads
by the templates renderer's rules (the tiny HuMo 17B model, its Whisper encoder, the lightx2v LoRA, umT5, the Wan 2.1
VAE), the reference picture the workspace's example.png and the sound its example.wav (1 s, 44.1 kHz stereo).
Changed besides: 64x64 instead of 640x640, 9 frames instead of 97, 2 steps instead of 6 and the seed fixed. As
shipped otherwise: the LoRA, shift 8, uni_pc, cfg 1, CreateVideo with the sound at 25 fps, SaveVideo.

    python scripts/wan_humo_template_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "video_humo"
NAME = "wan_humo_template"
SIDE, FRAMES, STEPS, SEED = 64, 9, 2, 42
# node id (after unpacking) -> {widget index: value}
WIDGETS = {
    9: {0: SIDE, 1: SIDE, 2: FRAMES},  # WanHuMoImageToVideo's width, height (640) and length (97)
    6: {0: SEED, 1: "fixed", 2: STEPS},  # KSampler's seed (randomize) and steps (6)
}


def tiny_template() -> dict:
    from scripts.workflow_files import tiny_flat_template

    return tiny_flat_template(TEMPLATE, WIDGETS)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
