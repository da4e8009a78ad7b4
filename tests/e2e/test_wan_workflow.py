"""The web UI's Wan 2.2 14B image-to-video template (workflows_json/wan22_i2v.json: its subgraph flattened by
scripts/wan_template_workflow.py, the tiny demo files in place of the downloads) from a fresh, empty workspace:
`serve` builds wan-tiny on its first start; the video is the same with the default executors and with
`--executors 0`, and its frames equal ComfyUI 0.10.0's frames of the same workflow on the same files
(recorded by scripts/record_comfyui_wan.py) to within 1/255, with the template's LoRA switch off (as shipped)
and on (the 4-step LoRAs merged into both experts); likewise the Wan 2.2 5B template (workflows_json/wan22_5b.json:
its start image bypassed as shipped, so text-to-video on the 48-channel latent and the Wan 2.2 VAE; and with
the start image on: Wan22ImageToVideoLatent's noise mask keeps the first latent frame, sampled with per-frame
timesteps); and the 14B workflow with WanFirstLastFrameToVideo in place of WanImageToVideo, and on Wan 2.1's
image-to-video model given the image's CLIP vision output, and as text-to-video (EmptyHunyuanLatentVideo, the
Wan 2.1 text-to-video model for both experts).

The MP4 is lossy, so the frames are compared as PNGs: a SaveImage beside SaveVideo takes VAEDecode's frames."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.e2e.served_video import (
    comfyui_frames,
    render_videos_in_both_modes,
    with_png_frames,
)
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows_json" / "wan22_i2v.json"
FIXTURE = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_wan.json.xz")
RECORDED = {
    "off": FIXTURE["workflow"],
    "lora": FIXTURE["workflow_lora"],
    "5b": FIXTURE["workflow_5b"],
    "5b_start_image": FIXTURE["workflow_5b_start_image"],
    "first_last": FIXTURE["workflow_first_last"],
    "clip_vision": FIXTURE["workflow_clip_vision"],
    "text": FIXTURE["workflow_text"],
}


def test_recorded_workflow_is_the_shipped_one() -> None:
    shipped = json.loads(WORKFLOW.read_text())
    assert RECORDED["off"]["prompt"] == shipped
    lora = json.loads(WORKFLOW.read_text())
    lora["131"]["inputs"]["value"] = True  # the template's enable_turbo_mode switch
    assert RECORDED["lora"]["prompt"] == lora
    first_last = json.loads(WORKFLOW.read_text())  # WanFirstLastFrameToVideo: the image first, its inverse last
    first_last["98"]["class_type"] = "WanFirstLastFrameToVideo"
    first_last["170"] = {"class_type": "ImageInvert", "inputs": {"image": ["97", 0]}}
    first_last["98"]["inputs"]["end_image"] = ["170", 0]
    assert RECORDED["first_last"]["prompt"] == first_last
    vision = json.loads(WORKFLOW.read_text())  # Wan 2.1 i2v with the start image's CLIP vision output
    for node in ("95", "96"):
        vision[node]["inputs"]["unet_name"] = "wan2.1_i2v_480p_14B_tiny.safetensors"
    vision["180"] = {"class_type": "CLIPVisionLoader", "inputs": {"clip_name": "clip-vision-tiny.safetensors"}}
    vision["181"] = {
        "class_type": "CLIPVisionEncode",
        "inputs": {"clip_vision": ["180", 0], "crop": "none", "image": ["97", 0]},
    }
    vision["98"]["inputs"]["clip_vision_output"] = ["181", 0]
    assert RECORDED["clip_vision"]["prompt"] == vision
    text = json.loads(WORKFLOW.read_text())  # text-to-video: EmptyHunyuanLatentVideo, Wan 2.1 t2v for both experts
    i2v, _ = text.pop("98"), text.pop("97")
    text["98"] = {
        "class_type": "EmptyHunyuanLatentVideo",
        "inputs": {k: i2v["inputs"][k] for k in ("width", "height", "length", "batch_size")},
    }
    for node in ("95", "96"):
        text[node]["inputs"]["unet_name"] = "wan2.1_t2v_1.3B_tiny.safetensors"
    for node in ("85", "86"):  # the prompts straight to both experts; the high-noise one starts from the latent
        text[node]["inputs"].update(positive=["93", 0], negative=["89", 0])
    text["86"]["inputs"]["latent_image"] = ["98", 0]
    assert RECORDED["text"]["prompt"] == text
    five = json.loads((REPO / "workflows_json" / "wan22_5b.json").read_text())
    assert RECORDED["5b"]["prompt"] == five
    five["56"] = {"class_type": "LoadImage", "inputs": {"image": "example.png"}}  # its bypassed LoadImage on
    five["55"]["inputs"]["start_image"] = ["56", 0]
    assert RECORDED["5b_start_image"]["prompt"] == five


def test_wan22_templates_from_a_fresh_workspace_in_both_executor_modes(tmp_path) -> None:
    prompts = {case: with_png_frames(rec["prompt"]) for case, rec in RECORDED.items()}
    default = render_videos_in_both_modes(tmp_path, prompts)
    assert (tmp_path / "fresh" / "models" / "diffusion_models" / "wan2.2_i2v_high_noise_14B_tiny.safetensors").is_file()
    for case, (pngs, mp4) in default.items():
        assert pngs.shape == (5, 64, 64, 3) and pngs.std() > 0 and len(mp4) == 5
        diff = np.abs(pngs.astype(int) - comfyui_frames(RECORDED[case]).astype(int))
        assert diff.max() <= 1, (
            f"{case}: {int((diff > 1).sum())} values differ from ComfyUI's frames by more than 1/255"
        )
    assert not np.array_equal(default["off"][0], default["lora"][0]), "the LoRAs changed nothing"
