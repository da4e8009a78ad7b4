"""VOID's nodes through the cluster: workflows_json/void_wan.json (the template's first pass on the tiny Wan 2.1
text-to-video file, which stands in for CogVideoX-Fun V1.5: VOIDQuadmaskPreprocess, VOIDInpaintConditioning through
the VAE, SamplerCustomAdvanced with VOIDSampler's steps on the executors) from a fresh workspace: the same frames
with the default executors and with `--executors 0`. The second pass's VOIDWarpedNoise runs in the node's process
(RAFT needs 256-pixel frames: seconds of CPU), so it is left to tests/nodes/test_void_nodes.py.

The template itself (utility_void_video_inpainting) on the tiny CogVideoX files is tests/e2e/test_void_template.py;
the nodes' numbers against ComfyUI's are tests/nodes/test_void_nodes.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.served_video import render_videos_in_both_modes, with_png_frames

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows_json" / "void_wan.json"


def test_void_chain_in_both_executor_modes(tmp_path) -> None:
    prompt = json.loads(WORKFLOW.read_text())
    assert {"VOIDQuadmaskPreprocess", "VOIDInpaintConditioning", "VOIDSampler"} <= {
        v["class_type"] for v in prompt.values()
    }
    (pngs, mp4) = render_videos_in_both_modes(tmp_path, {"void": with_png_frames(prompt)})["void"]
    assert pngs.shape == (5, 64, 64, 3) and pngs.std() > 0 and len(mp4) == 5
