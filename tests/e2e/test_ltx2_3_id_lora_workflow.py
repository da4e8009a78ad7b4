"""The web UI's LTX-2.3 ID-LoRA template (workflows_json/ltx2_3_id_lora.json, written by
scripts/ltx2_3_id_lora_workflow.py: ltx2-tiny's files, the ID-LoRA the tiny LoRA in ID-LoRA's layout, example.png as
the picture and example.wav as the reference voice, fixed seeds, 128x128 and 1 s at 25 fps) from a fresh, empty
workspace: the ID-LoRA over the distilled LoRA, LTXVReferenceAudio (the voice's tokens on both conditionings, identity
guidance at 3) before the first pass, the x2 latent upsampler and the second pass, VAE Decode (Tiled) and the audio VAE
into CreateVideo and SaveVideo. The frames (a SaveImage beside the template's SaveVideo), the MP4's frames and its
audio are the same with the default executors and with `--executors 0`, so the reference tokens and the extra guidance
pass reach the transformer alike in both. The transformer with the tokens is checked against the newest ComfyUI's code
in tests/models/test_ltxv_reference_audio.py, the node in tests/nodes/test_ltxv_reference_audio.py."""

from __future__ import annotations

import json

import numpy as np

from scripts.ltx2_3_id_lora_workflow import tiny_template
from tests.e2e.served import REPO
from tests.e2e.test_ltx2_3_i2v_workflow import _render, _with_png_frames

WORKFLOW = REPO / "workflows_json" / "ltx2_3_id_lora.json"


def test_shipped_ui_workflow_is_the_templates_graph() -> None:
    ui = json.loads(WORKFLOW.with_suffix("").with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    (node,) = [n for n in ui["nodes"] if n["type"] == "LTXVReferenceAudio"]
    assert node["widgets_values"][0] == 3
    assert [n["widgets_values"][0] for n in ui["nodes"] if n["type"] == "LoadAudio"] == ["example.wav"]
    loras = sorted(n["widgets_values"][0] for n in ui["nodes"] if n["type"] == "LoraLoaderModelOnly")
    assert loras == ["ltx-2-19b-lora_tiny.safetensors", "ltx-2.3-id-lora-talkvid-3k_tiny.safetensors"]


def test_template_renders_the_same_in_both_executor_modes(tmp_path) -> None:
    prompt = _with_png_frames(json.loads(WORKFLOW.read_text()))
    workspace = tmp_path / "fresh"
    pngs, mp4, audio, rate = _render(workspace, tmp_path / "default.log", prompt)
    other_pngs, other_mp4, other_audio, other_rate = _render(workspace, tmp_path / "x0.log", prompt, "--executors", "0")
    # 25 frames (1 s at 25 fps: 4 latent frames) of 128x128: the first pass at 64x64, upsampled x2
    assert pngs.shape == (25, 128, 128, 3) and pngs.std() > 0 and len(mp4) == 25
    assert np.array_equal(pngs, other_pngs), "frames differ between the executor modes"
    assert all(np.array_equal(a, b) for a, b in zip(mp4, other_mp4, strict=True))
    assert rate == other_rate == 16000 and np.abs(audio).max() > 1e-4
    # the audio VAE's float32 rounding follows the thread count (see test_ltx2_3_i2v_workflow): close, not equal
    diff = float(np.abs(audio - other_audio).max())
    assert diff <= 0.01 * float(np.abs(audio).max()), f"audio differs between the executor modes by {diff}"
