"""The web UI's three LTX-2.5 templates as shipped workflows (workflows_json/ltx2_5_{i2v,t2v,flf2v}.json, written by
scripts/ltx2_5_workflows.py: each template's node graph unpacked from its subgraph, the tiny LTX-2.5 files in place
of the downloads, example.png, fixed seeds, 25 frames at 24 fps) from a fresh, empty workspace: the LTX-2.5
transformer reading the Gemma 4 encoder's unprocessed embeddings through its connectors, LTXVDualCFGGuider, the
diffusion-decoder video VAE through VAE Decode (Tiled), the audio VAE file through VAELoader into LTXV Audio VAE
Decode (its bandwidth-extension vocoder at 48 kHz), CreateVideo and SaveVideo, the prompt enhancer switched off as
shipped; image-to-video's LTXVImgToVideoInplace and text-to-video's two passes with LTX-2's latent upsampler between
them, first-last frame's LTXVAddGuide guides and LTXV Crop Guides. The frames (a SaveImage beside each template's
SaveVideo) and the MP4's frames are the same with the default executors and with `--executors 0`. Their parts are
checked against ComfyUI's own code on the same tiny files in tests/models/test_ltx25_*.py,
tests/models/test_ltx2_bwe_vocoder.py and tests/nodes/test_ltx*.py; no ComfyUI that runs the whole templates can run
here (LTX-2.5 is newer than every runnable one)."""

from __future__ import annotations

import json

import pytest

from scripts.ltx2_5_workflows import TEMPLATES, tiny_template
from tests.e2e.served import REPO
from tests.e2e.served_video import render_videos_in_both_modes

# 25 frames (1 s at 24 fps: 4 latent frames): image- and text-to-video sized by the Resolution Selector at its
# smallest (the second pass's x2 upsampled latent), first-last frame by its Width / Height primitives
FRAMES = {"ltx2_5_i2v": (25, 256, 512, 3), "ltx2_5_t2v": (25, 256, 512, 3), "ltx2_5_flf2v": (25, 128, 128, 3)}


def _workflow(name: str) -> dict:
    return json.loads((REPO / "workflows_json" / f"{name}.json").read_text())


def _with_png_frames(prompt: dict) -> dict:
    (decode,) = [k for k, v in prompt.items() if v["class_type"] == "VAEDecodeTiled"]
    frames = {"class_type": "SaveImage", "inputs": {"images": [decode, 0], "filename_prefix": "ltx25_frames"}}
    return {**prompt, "900": frames}


@pytest.mark.parametrize("name", TEMPLATES)
def test_shipped_ui_workflow_is_the_templates_graph(name: str) -> None:
    ui = json.loads((REPO / "workflows_json" / f"{name}.ui.json").read_text())
    assert ui == tiny_template(TEMPLATES[name])
    classes = {n["type"] for n in ui["nodes"]}
    assert classes >= {"UNETLoader", "LTXVDualCFGGuider", "VAEDecodeTiled", "LTXVAudioVAEDecode"}
    files = {v for n in ui["nodes"] for v in n.get("widgets_values") or [] if isinstance(v, str)}
    assert {"ltx-2.5-22b-distilled-transformer_tiny.safetensors", "ltx-2.5-audio-vae_tiny.safetensors"} <= files


def test_templates_render_the_same_in_both_executor_modes(tmp_path) -> None:
    rendered = render_videos_in_both_modes(tmp_path, {name: _with_png_frames(_workflow(name)) for name in TEMPLATES})
    for name, (pngs, mp4) in rendered.items():
        assert pngs.shape == FRAMES[name] and len(mp4) == 25, name
        assert pngs.std() > 0, f"{name}: the frames are flat"
