"""Write workflows_json/ltx2_5_t2v.ui.json and .json: the web UI's "LTX-2.5 text to video" template
(video_ltx2_5_t2v) through scripts/ltx2_5_i2v_workflow.py's rules: its node graph unpacked, the tiny LTX-2.5 files in
place of the downloads, the noise seeds fixed, Width / Height 128 and Duration 1 s at 24 fps, the Resolution
Selector shrunk as there. As shipped otherwise: the prompt enhancer switched off, the two distilled passes with
LTXVDualCFGGuider and the x2 latent upsampler between them, VAE Decode (Tiled), LTXV Audio VAE Decode, CreateVideo and
SaveVideo.

    python scripts/ltx2_5_t2v_workflow.py <workspace with demo-models>
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TEMPLATE = "video_ltx2_5_t2v"
NAME = "ltx2_5_t2v"


def tiny_template() -> dict:
    from scripts.ltx2_5_i2v_workflow import tiny_template as tiny

    return tiny(TEMPLATE)


def main() -> None:
    from scripts.workflow_files import workspace_registry, write_workflow

    write_workflow(NAME, tiny_template(), workspace_registry(sys.argv[1]))


if __name__ == "__main__":
    main()
