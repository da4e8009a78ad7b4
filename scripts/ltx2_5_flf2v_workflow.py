"""Write workflows_json/ltx2_5_flf2v.ui.json and .json: the web UI's "LTX-2.5 first-last frame to video"
template (video_ltx2_5_flf2v) through scripts/ltx2_5_i2v_workflow.py's rules: its node graph unpacked, the tiny
LTX-2.5 files in place of the downloads, both frames the workspace's example.png, the noise seed fixed, Width / Height
128 and Duration 1 s at 24 fps. As shipped otherwise: the first (0) and last (-1) frames added as guides at strength
0.7 (LTXVAddGuide), the distilled schedule with Euler ancestral and LTXVDualCFGGuider, LTXV Crop Guides before VAE
Decode (Tiled), LTXV Audio VAE Decode, CreateVideo and SaveVideo.

    python scripts/ltx2_5_flf2v_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "video_ltx2_5_flf2v"
NAME = "ltx2_5_flf2v"


def tiny_template() -> dict:
    from scripts.ltx2_5_i2v_workflow import tiny_template as tiny

    return tiny(TEMPLATE)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
