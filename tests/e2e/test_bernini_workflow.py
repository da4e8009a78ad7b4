"""Bernini-R video editing through the cluster: workflows_json/bernini_video_editing.json (the template
video_bernini_r_video_editing's core on the tiny files: Bernini-R's two experts with the T2V LoRA at 3.0 / 1.5, umT5,
the Wan 2.1 VAE; BerniniConditioning with a source video and a reference image scaled down by ref_max_size; the
template's SamplerCustom pair over SplitSigmas with res_multistep, CFG on the high-noise half), from a fresh
workspace: the frames are the same with the default executors and with `--executors 0`, and differ from the same
prompt without source and reference (text to video), so the context latents reach the network in both modes.

The network and BerniniConditioning are checked against the newest ComfyUI's code in tests/models/test_wan_bernini.py;
the whole workflow is not recorded on ComfyUI (no ComfyUI that runs here has Bernini)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.e2e.served_video import render_videos_in_both_modes

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows_json" / "bernini_video_editing.json"


def with_png_frames(prompt: dict) -> dict:
    """The prompt with a SaveImage of the frames SaveVideo shows."""
    return {**prompt, "900": {"class_type": "SaveImage", "inputs": {"images": ["18", 0], "filename_prefix": "bernini"}}}


def test_bernini_in_both_executor_modes(tmp_path) -> None:
    prompt = json.loads(WORKFLOW.read_text())
    assert {"BerniniConditioning", "SamplerCustom", "SplitSigmas", "LoraLoaderModelOnly"} <= {
        v["class_type"] for v in prompt.values()
    }
    bare = json.loads(WORKFLOW.read_text())
    for name in ("source_video", "reference_images.reference_image_0"):
        del bare["12"]["inputs"][name]
    frames = render_videos_in_both_modes(tmp_path, {"edit": with_png_frames(prompt), "t2v": with_png_frames(bare)})
    (pngs, mp4), (bare_pngs, _) = frames["edit"], frames["t2v"]
    assert pngs.shape == (5, 48, 64, 3) and pngs.std() > 0 and len(mp4) == 5
    assert np.abs(pngs.astype(int) - bare_pngs.astype(int)).max() > 8  # the streams change the video
