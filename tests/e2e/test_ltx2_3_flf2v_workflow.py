"""The web UI's LTX-2.3 first-last frame template (workflows_json/ltx2_3_flf2v.json, written by
scripts/ltx2_3_flf2v_workflow.py: ltx2-tiny's files, example.png as both frames, a fixed seed, 128x128 and 1 s at
25 fps) from a fresh, empty workspace: the last and the first frame added as guides (LTXVAddGuide, strength 0.7),
the distilled schedule with Euler ancestral, LTXV Crop Guides, VAE Decode (Tiled) and the audio VAE into CreateVideo
and SaveVideo. The frames (a SaveImage beside the template's SaveVideo), the MP4's frames and its audio are the same
with the default executors and with `--executors 0`, so the guides' positions (keyframe_idxs) reach the transformer
alike in both. LTXVAddGuide and the guided sampling are checked against ComfyUI 0.10.0 in
tests/nodes/test_ltxv_add_guide.py; 0.10.0 cannot run the whole template (it lacks ComfyMathExpression)."""

from __future__ import annotations

import json

import numpy as np

from scripts.ltx2_3_flf2v_workflow import tiny_template
from tests.e2e.served import REPO
from tests.e2e.test_ltx2_3_i2v_workflow import _render, _with_png_frames

WORKFLOW = REPO / "workflows_json" / "ltx2_3_flf2v.json"


def test_shipped_ui_workflow_is_the_templates_graph() -> None:
    ui = json.loads(WORKFLOW.with_suffix("").with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    guides = [n for n in ui["nodes"] if n["type"] == "LTXVAddGuide"]
    assert sorted(n["widgets_values"][0] for n in guides) == [-1, 0]
    assert {n["type"] for n in ui["nodes"]} >= {"LTXVCropGuides", "VAEDecodeTiled", "LTXVAudioVAEDecode"}


def test_template_renders_the_same_in_both_executor_modes(tmp_path) -> None:
    prompt = _with_png_frames(json.loads(WORKFLOW.read_text()))
    workspace = tmp_path / "fresh"
    pngs, mp4, audio, rate = _render(workspace, tmp_path / "default.log", prompt)
    other_pngs, other_mp4, other_audio, other_rate = _render(workspace, tmp_path / "x0.log", prompt, "--executors", "0")
    # 25 frames (1 s at 25 fps: 4 latent frames, the two guide frames cropped off) of 128x128
    assert pngs.shape == (25, 128, 128, 3) and pngs.std() > 0 and len(mp4) == 25
    assert np.array_equal(pngs, other_pngs), "frames differ between the executor modes"
    assert all(np.array_equal(a, b) for a, b in zip(mp4, other_mp4, strict=True))
    assert rate == other_rate == 16000 and np.abs(audio).max() > 1e-4
    # the audio VAE's float32 rounding follows the thread count (see test_ltx2_3_i2v_workflow): close, not equal
    diff = float(np.abs(audio - other_audio).max())
    assert diff <= 0.01 * float(np.abs(audio).max()), f"audio differs between the executor modes by {diff}"
