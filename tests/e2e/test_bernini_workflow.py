"""Bernini-R video editing through the cluster: workflows_json/bernini_video_editing.json (the template
video_bernini_r_video_editing's core on the tiny files: Bernini-R's two experts with the T2V LoRA at 3.0 / 1.5, umT5,
the Wan 2.1 VAE; BerniniConditioning with a source video and a reference image scaled down by ref_max_size; the
template's SamplerCustom pair over SplitSigmas with res_multistep, CFG on the high-noise half), from a fresh
workspace: the frames are the same with the default executors and with `--executors 0`, they differ from the same
prompt without source and reference (text to video), so the context latents reach the network in both modes, and
they follow ComfyUI's (0.10.0's node classes with the newest source's BerniniConditioning and Bernini network, WAN21's
streams in extra_conds: scripts/record_comfyui_bernini.py): within 1/255 without the LoRAs, within 2/255 with them.
The experts are scaled fp8 files: ComfyUI puts a LoRA into such a weight and rounds the sum back to fp8
(stochastically, scale recomputed); we keep the sum in float32, so the shipped prompt's frames differ by up to 2/255."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.e2e.served_video import pixels, render_videos_in_both_modes
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows_json" / "bernini_video_editing.json"
RECORDED = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_bernini.json.xz")["workflow"]


def with_png_frames(prompt: dict) -> dict:
    """The prompt with a SaveImage of the frames SaveVideo shows."""
    return {**prompt, "900": {"class_type": "SaveImage", "inputs": {"images": ["18", 0], "filename_prefix": "bernini"}}}


def without_loras(prompt: dict) -> dict:
    """The prompt with each LoraLoaderModelOnly's consumers fed by its model input (the recorder's same variant)."""
    loras = {k: v["inputs"]["model"] for k, v in prompt.items() if v["class_type"] == "LoraLoaderModelOnly"}
    return {
        key: {
            **node,
            "inputs": {
                k: loras[v[0]] if isinstance(v, list) and v[0] in loras else v for k, v in node["inputs"].items()
            },
        }
        for key, node in prompt.items()
        if key not in loras
    }


def test_recorded_workflow_is_the_shipped_one() -> None:
    assert RECORDED["prompt"] == json.loads(WORKFLOW.read_text())


def _off_by_more_than(ours: np.ndarray, theirs: dict, bound: int) -> int:
    return int((np.abs(ours.astype(int) - pixels(theirs).astype(int)) > bound).sum())


def test_bernini_in_both_executor_modes_follows_comfyui(tmp_path) -> None:
    prompt = json.loads(WORKFLOW.read_text())
    assert {"BerniniConditioning", "SamplerCustom", "SplitSigmas", "LoraLoaderModelOnly"} <= {
        v["class_type"] for v in prompt.values()
    }
    bare = json.loads(WORKFLOW.read_text())
    for name in ("source_video", "reference_images.reference_image_0"):
        del bare["12"]["inputs"][name]
    cases = {"edit": prompt, "t2v": bare, "no_loras": without_loras(prompt)}
    frames = render_videos_in_both_modes(tmp_path, {k: with_png_frames(v) for k, v in cases.items()})
    (pngs, mp4), (bare_pngs, _), (plain_pngs, _) = frames["edit"], frames["t2v"], frames["no_loras"]
    assert pngs.shape == (5, 48, 64, 3) and pngs.std() > 0 and len(mp4) == 5
    assert np.abs(pngs.astype(int) - bare_pngs.astype(int)).max() > 8  # the streams change the video
    assert _off_by_more_than(plain_pngs, RECORDED["frames_without_loras"], 1) == 0
    assert _off_by_more_than(pngs, RECORDED["frames"], 2) == 0  # fp8 re-rounding of LoRA'd weights (docstring)
