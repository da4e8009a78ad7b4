"""The web UI's Kandinsky 5 text-to-video and image-to-video templates (workflows_json/kandinsky5_t2v.json and
_i2v.json, written by scripts/kandinsky5_workflow.py: the templates' graphs on the tiny files, 64x48, 33 frames,
3 steps, the tiny HunyuanVideo 1.0 VAE) from a fresh, empty workspace:
the video is the same with the default executors and with `--executors 0`, and its frames equal ComfyUI 0.10.0's
frames of the same workflow on the same files (recorded by scripts/record_comfyui_kandinsky5_workflows.py) to within
1/255.

The MP4 is lossy, so the frames are compared as PNGs: a SaveImage beside SaveVideo takes VAEDecode's frames.

The text-to-image template (workflows_json/kandinsky5_t2i.json: the image DiT demo-models writes, 64x48, 3 steps)
likewise: the same picture in both executor modes, within 1/255 of ComfyUI 0.10.0's
(scripts/record_comfyui_kandinsky5_image.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from scripts.kandinsky5_workflow import IMAGE_WORKFLOW, WORKFLOWS
from tests.e2e.served import assert_within_1_of_255_of_record, render_in_both_modes
from tests.e2e.served_video import render_videos_in_both_modes, with_png_frames
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_kandinsky5_workflows.json.xz")["workflows"]
IMAGE = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_kandinsky5_image.json.xz")["image_template"]


def test_recorded_workflows_are_the_shipped_ones() -> None:
    assert sorted(RECORDED) == sorted(WORKFLOWS)
    for name, rec in RECORDED.items():
        assert rec["prompt"] == json.loads((REPO / "workflows_json" / f"{name}.json").read_text())


def test_templates_from_a_fresh_workspace_in_both_executor_modes(tmp_path) -> None:
    frames = render_videos_in_both_modes(tmp_path, {name: with_png_frames(r["prompt"]) for name, r in RECORDED.items()})
    for name, (pngs, mp4) in frames.items():
        assert pngs.shape == (33, 48, 64, 3) and pngs.std() > 0 and len(mp4) == 33, name
        assert RECORDED[name]["latent_shape"] == [1, 16, 9, 6, 8]
        assert_within_1_of_255_of_record(pngs, RECORDED[name]["frames"], f"ComfyUI's {name} frames")
    assert not np.array_equal(frames["kandinsky5_i2v"][0], frames["kandinsky5_t2v"][0])


def test_image_template_from_a_fresh_workspace_in_both_executor_modes(tmp_path) -> None:
    prompt = json.loads((REPO / "workflows_json" / f"{IMAGE_WORKFLOW}.json").read_text())
    assert prompt == IMAGE["prompt"], "the shipped workflow is not the one ComfyUI rendered"
    image = render_in_both_modes(tmp_path, prompt)
    assert image.shape == (48, 64, 3) and image.std() > 0
    (theirs,) = IMAGE["pngs_rgb"]
    assert_within_1_of_255_of_record(image, theirs)
