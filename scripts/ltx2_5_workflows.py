"""Write workflows_json/ltx2_5_{i2v,t2v,flf2v}.ui.json and .json: the web UI's three LTX-2.5 templates
(video_ltx2_5_i2v, video_ltx2_5_t2v, video_ltx2_5_flf2v) through scripts/ltx2_3_i2v_workflow.py's rules: each node
graph unpacked from its subgraph, the tiny LTX-2.5 files in place of the downloads (the transformer, the Gemma 4 text
encoder with its projection and the prompt enhancer, the diffusion-decoder video VAE, the audio VAE, LTX-2's tiny
latent upsampler), pictures the workspace's example.png (its longer side scaled to 128), the noise seeds fixed and
the sizes shrunk as the renderer shrinks them (Duration 1 s at 24 fps: 25 frames; the Resolution Selector's 0.9
megapixels to 0.01, which it rounds up to 512x256; Width / Height 128 where the template sets them). As shipped
otherwise: the prompt enhancer switched off, LTXVImgToVideoInplace on both passes (image to video), the two-pass
distilled schedule (ManualSigmas, Euler ancestral, LTXVDualCFGGuider at 1/1) with the x2 latent upsampler between
them, VAE Decode (Tiled), LTXV Audio VAE Decode, CreateVideo and SaveVideo.

    python scripts/ltx2_5_workflows.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# the shipped workflow's name: the template it is written from
TEMPLATES = {"ltx2_5_i2v": "video_ltx2_5_i2v", "ltx2_5_t2v": "video_ltx2_5_t2v", "ltx2_5_flf2v": "video_ltx2_5_flf2v"}


def tiny_template(template: str) -> dict:
    """The template's graph with the tiny files."""
    from scripts.ltx2_3_i2v_workflow import tiny_template as tiny
    from scripts.templates_render import SHRINK

    flat = tiny(template)
    for node in flat["nodes"]:
        if node["type"] == "ResolutionSelector":  # the template's size comes from it, not from Width/Height
            node["widgets_values"][1] = SHRINK["megapixels"](node["widgets_values"][1])
    return flat


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    registry = workspace_registry(sys.argv[1])
    for name, template in TEMPLATES.items():
        write_workflow(name, tiny_template(template), registry)


if __name__ == "__main__":
    main()
