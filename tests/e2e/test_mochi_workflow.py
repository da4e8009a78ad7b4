"""Genmo Mochi 1 preview's text-to-video workflow (workflows_json/mochi_t2v.json: ComfyUI's Mochi example graph,
UNETLoader, CLIPLoader type mochi, EmptyMochiLatentVideo, KSampler, VAELoader, VAEDecode, CreateVideo / SaveVideo,
on the tiny files, 64x48, 13 frames, 3 euler steps at cfg 4.5, seed 42) from a fresh, empty workspace: the video is
the same with the default executors and with `--executors 0`, and VAEDecode's frames equal ComfyUI 0.3.64's frames of
the same workflow on the same files (scripts/record_comfyui_mochi.py) to within 1/255. The MP4 is lossy, so the
frames are compared as PNGs (a SaveImage beside SaveVideo)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.served import assert_within_1_of_255_of_record
from tests.e2e.served_video import render_videos_in_both_modes, with_png_frames
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_mochi.json.xz")["workflow"]


def test_mochi_t2v_renders_comfyuis_frames_in_both_executor_modes(tmp_path: Path) -> None:
    prompt = json.loads((REPO / "workflows_json" / "mochi_t2v.json").read_text())
    assert RECORDED["prompt"] == prompt
    ((pngs, mp4),) = render_videos_in_both_modes(tmp_path, {"mochi_t2v": with_png_frames(prompt)}).values()
    assert pngs.shape == (13, 48, 64, 3) and len(mp4) == 13
    assert_within_1_of_255_of_record(pngs, RECORDED["frames"], "ComfyUI 0.3.64's frames")
