"""Write workflows_json/wan_s2v_template.ui.json and .json: the web UI's "Wan 2.2 S2V" template
(video_wan2_2_14B_s2v of the installed comfyui-workflow-templates-json package) with its own node graph, its two
"Video S2V Extend" subgraphs unpacked by the templates renderer's unpacker (scripts/templates_render.py), the tiny
demo files put in place of the downloads by the renderer's rules (the tiny S2V model, its wav2vec 2.0 encoder and
lightx2v LoRA, umT5, the Wan 2.1 VAE), the reference picture the workspace's example.png and the sound its
example.wav (1 s, 44.1 kHz stereo). Changed besides: 64x64 instead of 640x640, chunks of 9 frames instead of 77,
2 steps instead of 4 and the first sampler's seed fixed. As shipped otherwise: the lightx2v LoRA, shift 8, cfg 1,
the first clip and two extensions each continuing the latent so far, the doubled first latent frame cut off after
decoding, CreateVideo with the audio at 16 fps, today's SaveVideo.

    python scripts/wan_s2v_template_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "video_wan2_2_14B_s2v"
NAME = "wan_s2v_template"
SIDE = 64
FRAMES = 9
# node id (after unpacking) -> {widget index: value}
WIDGETS = {
    7: {0: SIDE, 1: SIDE, 2: FRAMES},  # WanSoundImageToVideo's width, height (640) and length (linked, 77)
    11: {0: FRAMES},  # the chunk length primitive (77)
    23: {0: 2},  # the steps primitive (4)
    31: {1: "fixed"},  # the first KSampler's seed (randomize)
}


def tiny_template() -> dict:
    from scripts.workflow_files import tiny_flat_template

    return tiny_flat_template(TEMPLATE, WIDGETS)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
