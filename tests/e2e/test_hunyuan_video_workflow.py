"""The web UI's HunyuanVideo 1.0 text-to-video template (workflows_json/hunyuan_video_t2v.json, written by
scripts/hunyuan_video_workflow.py: the template's graph on the tiny files, 64x48, 33 frames, 3 euler steps, seed 42)
from a fresh, empty workspace: the video is the same with the default executors and with `--executors 0`, and its
frames equal ComfyUI's frames of the same workflow on the same files (recorded by
scripts/record_comfyui_hunyuan_video_workflow.py) to within 1/255. The frames are upstream 0.10.0's: ComfyUI 0.3.64
samples the same latent (the two within 1.1e-5, both recorded) but its conv3d VAE decodes the whole video at once,
where 0.10.0's (and ours, nodes/models/hunyuan_video_vae.py) decodes two latent frames at a time, so 0.3.64's
frames differ from both by up to 38/255.

The image-to-video prompts (scripts/hunyuan_video_workflow.py's image_to_video_prompt: example.png through
CLIPVisionEncode with llava's vision file into TextEncodeHunyuanVideo_ImageToVideo, and through HunyuanImageToVideo
into the same graph, v1 concat on the 33-channel DiT, v2 replace on the 16-channel one with its noise mask) are
rendered and compared the same way; they are not shipped as workflows (the templates package has no HunyuanVideo
1.0 image-to-video template).

The MP4 is lossy, so the frames are compared as PNGs: a SaveImage beside SaveVideo takes VAEDecodeTiled's frames."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from scripts.hunyuan_video_workflow import WORKFLOWS, image_to_video_prompt
from tests.e2e.served import assert_within_1_of_255_of_record
from tests.e2e.served_video import render_videos_in_both_modes
from tests.recorded_tensors import load_json, tensor

REPO = Path(__file__).resolve().parents[2]
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_hunyuan_video_workflow.json.xz")


def with_png_frames(prompt: dict) -> dict:
    """The prompt with a SaveImage of VAEDecodeTiled's frames beside the template's SaveVideo."""
    (decode,) = [k for k, v in prompt.items() if v["class_type"] == "VAEDecodeTiled"]
    save = {"class_type": "SaveImage", "inputs": {"images": [decode, 0], "filename_prefix": "hunyuan_frames"}}
    return {**prompt, "900": save}


IMAGE_TO_VIDEO = {"hunyuan_video_i2v_v1": "v1 (concat)", "hunyuan_video_i2v_v2": "v2 (replace)"}


def test_recorded_workflows_are_the_shipped_ones() -> None:
    assert (RECORDED["comfyui_version"], RECORDED["earlier"]["comfyui_version"]) == ("0.10.0", "0.3.64")
    assert sorted(RECORDED["workflows"]) == sorted([*WORKFLOWS, *IMAGE_TO_VIDEO])
    t2v = json.loads((REPO / "workflows_json" / "hunyuan_video_t2v.json").read_text())
    for name, kind in IMAGE_TO_VIDEO.items():
        assert RECORDED["workflows"][name]["prompt"] == image_to_video_prompt(t2v, kind)
    for name, rec in RECORDED["earlier"]["workflows"].items():  # the sampling is 0.3.64's too
        assert rec["prompt"] == RECORDED["workflows"][name]["prompt"]
        torch.testing.assert_close(
            tensor(rec["latent"]), tensor(RECORDED["workflows"][name]["latent"]), atol=2e-5, rtol=0
        )
    for name in WORKFLOWS:
        assert RECORDED["workflows"][name]["prompt"] == json.loads(
            (REPO / "workflows_json" / f"{name}.json").read_text()
        )


def test_template_from_a_fresh_workspace_in_both_executor_modes(tmp_path) -> None:
    recorded = RECORDED["workflows"]
    frames = render_videos_in_both_modes(tmp_path, {n: with_png_frames(r["prompt"]) for n, r in recorded.items()})
    for name, (pngs, mp4) in frames.items():
        assert pngs.shape == (33, 48, 64, 3) and pngs.std() > 0 and len(mp4) == 33, name
        assert recorded[name]["latent_shape"] == [1, 16, 9, 6, 8]
        assert_within_1_of_255_of_record(pngs, recorded[name]["frames"], f"ComfyUI's {name} frames")
    t2v = frames["hunyuan_video_t2v"][0]
    for name in IMAGE_TO_VIDEO:  # the start image changes the video
        assert not np.array_equal(frames[name][0], t2v), name
