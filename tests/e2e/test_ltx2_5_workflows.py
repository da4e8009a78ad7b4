"""The web UI's LTX-2.5 image-to-video template (workflows_json/ltx2_5_i2v.json, written by
scripts/ltx2_5_i2v_workflow.py: the template's node graph unpacked from its subgraph, the tiny LTX-2.5 files in place
of the downloads, example.png, fixed seeds, 25 frames at 24 fps, 512x256 after the upsampler) from a fresh, empty
workspace: the LTX-2.5 transformer reading the Gemma 4 encoder's unprocessed embeddings through its connectors, the
two-pass distilled schedule with LTXVDualCFGGuider, LTX-2's latent upsampler between the passes, the diffusion-decoder
video VAE through VAE Decode (Tiled), the audio VAE file through VAELoader into LTXV Audio VAE Decode, CreateVideo and
SaveVideo, the prompt enhancer switched off as shipped. The frames (a SaveImage beside the template's SaveVideo) and
the MP4's frames are the same with the default executors and with `--executors 0`. Its parts are checked against
ComfyUI's own code on the same tiny files in tests/models/test_ltx25_*.py and tests/nodes/test_ltx*.py; no ComfyUI
that runs the whole template can run here (LTX-2.5 is newer than every runnable one)."""

from __future__ import annotations

import json

from scripts.ltx2_5_i2v_workflow import tiny_template
from tests.e2e.served import REPO
from tests.e2e.served_video import render_videos_in_both_modes

WORKFLOW = REPO / "workflows_json" / "ltx2_5_i2v.json"


def _with_png_frames(prompt: dict) -> dict:
    (decode,) = [k for k, v in prompt.items() if v["class_type"] == "VAEDecodeTiled"]
    frames = {"class_type": "SaveImage", "inputs": {"images": [decode, 0], "filename_prefix": "ltx25_frames"}}
    return {**prompt, "900": frames}


def test_shipped_ui_workflow_is_the_templates_graph() -> None:
    ui = json.loads(WORKFLOW.with_suffix("").with_suffix(".ui.json").read_text())
    assert ui == tiny_template()
    classes = {n["type"] for n in ui["nodes"]}
    assert classes >= {"UNETLoader", "LTXVDualCFGGuider", "LTXVLatentUpsampler", "VAEDecodeTiled", "LTXVAudioVAEDecode"}
    files = {v for n in ui["nodes"] for v in n.get("widgets_values") or [] if isinstance(v, str)}
    assert {"ltx-2.5-22b-distilled-transformer_tiny.safetensors", "ltx-2.5-audio-vae_tiny.safetensors"} <= files


def test_template_renders_the_same_in_both_executor_modes(tmp_path) -> None:
    prompt = _with_png_frames(json.loads(WORKFLOW.read_text()))
    ((pngs, mp4),) = render_videos_in_both_modes(tmp_path, {"i2v": prompt}).values()
    # 25 frames (1 s at 24 fps: 4 latent frames) of the Resolution Selector's 16:9 at its smallest, 512x256
    assert pngs.shape == (25, 256, 512, 3) and len(mp4) == 25
    assert pngs.std() > 0, "the frames are flat"
