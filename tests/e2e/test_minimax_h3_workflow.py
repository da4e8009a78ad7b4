"""MiniMax H3 text-to-video, video only (workflows_json/minimax_h3_t2v_video_only.json: the core of the web UI's
MiniMax H3 image-to-video template's subgraph, its nodes and sampler settings, with no first frame, no audio VAE
branch and no LoRA switch; the tiny demo files in place of the downloads) from a fresh, empty workspace: `serve`
builds the demo files on its first start, and the frames and the MP4 are the same with the default executors and
with `--executors 0`. No ComfyUI that runs here has MiniMax H3: the frames are checked against the model code
through the nodes' in-process chain in tests/nodes/test_minimax_h3_nodes.py, not against a ComfyUI run."""

from __future__ import annotations

import json

from tests.e2e.served import REPO
from tests.e2e.served_video import render_videos_in_both_modes, with_png_frames

WORKFLOW = REPO / "workflows_json" / "minimax_h3_t2v_video_only.json"


def test_video_only_text_to_video_in_both_executor_modes(tmp_path) -> None:
    prompts = {"t2v": with_png_frames(json.loads(WORKFLOW.read_text()))}
    pngs, mp4 = render_videos_in_both_modes(tmp_path, prompts)["t2v"]
    # 22 frames of 64x32 (17k+5 at 24 fps: 7 latent frames)
    assert pngs.shape == (22, 32, 64, 3) and pngs.std() > 0 and len(mp4) == 22
