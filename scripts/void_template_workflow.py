"""Write workflows_json/void_template.ui.json and .json: the web UI's VOID video inpainting template
(utility_void_video_inpainting of the installed comfyui-workflow-templates-json package) with its own node graph
(SAM 3.1 segments the person, VOIDQuadmaskPreprocess / VOIDInpaintConditioning, pass 1 from RandomNoise, then
OpticalFlowLoader + VOIDWarpedNoise warp pass 1's frames into pass 2's noise, both passes SamplerCustomAdvanced +
CFGGuider + VOIDSampler, the source's sound trimmed onto both videos), the tiny demo files put in place of the
downloads by the templates renderer's rules (void_pass1 / void_pass2 tiny CogVideoX transformers, the tiny CogVideoX
VAE, flux-tiny-t5 as T5-XXL, SAM 3.1 tiny, the seeded RAFT-large stand-in) and the workspace's example clip with
its sound (example_with_sound.mp4) as the source video. Changed besides: 256x256 instead of 672x384 (the least RAFT takes), 5 frames instead
of 45, 2 steps instead of 30. As shipped otherwise: cfg 6, the fixed seed 43, the prompts.

    python scripts/void_template_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "utility_void_video_inpainting"
NAME = "void_template"
SIDE, FRAMES, STEPS = 256, 5, 2  # RAFT needs 128-pixel sides after the warp halves the frames
# node id (after unpacking) -> {widget index: value}
WIDGETS = {
    3: {0: "example_with_sound.mp4"},  # LoadVideo: a clip with a sound track (the template trims its sound)
    48: {0: SIDE},  # the width primitive (672) and its PrimitiveInt
    25: {0: SIDE},
    49: {0: SIDE},  # the height primitive (384)
    26: {0: SIDE},
    22: {0: SIDE, 1: SIDE, 2: FRAMES},  # VOIDWarpedNoise's width, height, length (45)
    16: {0: SIDE, 1: SIDE, 2: FRAMES},  # VOIDInpaintConditioning's
    17: {1: STEPS},  # both BasicSchedulers' steps (30)
    31: {1: STEPS},
}


def tiny_template() -> dict:
    from scripts.workflow_files import tiny_flat_template

    return tiny_flat_template(TEMPLATE, WIDGETS)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
