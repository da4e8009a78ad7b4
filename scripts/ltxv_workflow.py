"""Write workflows_json/ltxv_image_to_video.ui.json / .json and ltxv_text_to_video.ui.json / .json: the web UI's
LTX-Video 0.9 templates (ltxv_image_to_video, ltxv_text_to_video of the installed comfyui-workflow-templates-json
package) with their own node graphs, ltxv-tiny's checkpoint (nodes/models/ltxv_demo.py) in place of
ltx-video-2b-v0.9(.5) and flux-tiny-t5 in place of t5xxl_fp16 (templates_render's rules), the workspace's
example.png as the picture, the noise seed fixed, 96 x 64 pixels, 9 frames and 3 LTXVScheduler steps; everything
else as shipped (the negative prompt, LTXVConditioning at 25 fps, the scheduler's shifts, euler, cfg 3,
LTXVImgToVideo's strength 0.15, CreateVideo at 24 fps and SaveVideo). The API format is our UI converter's output.

    python scripts/ltxv_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SEED = 42
WIDTH, HEIGHT, LENGTH, STEPS = 96, 64, 9, 3
COMMON = {
    "CheckpointLoaderSimple": [(0, "ltx-video-2b-v0.9_tiny.safetensors")],
    "CLIPLoader": [(0, "flux-tiny-t5.safetensors")],
    "SamplerCustom": [(1, SEED), (2, "fixed")],
    "LTXVScheduler": [(0, STEPS)],
}
TEMPLATES = {
    "ltxv_image_to_video": {
        **COMMON,
        "LoadImage": [(0, "example.png")],
        "LTXVImgToVideo": [(0, WIDTH), (1, HEIGHT), (2, LENGTH)],
    },
    "ltxv_text_to_video": {**COMMON, "EmptyLTXVLatentVideo": [(0, WIDTH), (1, HEIGHT), (2, LENGTH)]},
}


def main() -> None:
    from scripts.workflow_files import tiny_template_ui, workspace_registry, write_workflow

    registry = workspace_registry(sys.argv[1])
    for name, substitute in TEMPLATES.items():
        write_workflow(name, tiny_template_ui(name, substitute), registry)


if __name__ == "__main__":
    main()
