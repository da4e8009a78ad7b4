"""SD2.1 unCLIP through the cluster: unCLIPCheckpointLoader's image encoder (from the checkpoint) feeds
CLIPVisionEncode and unCLIPConditioning with noise augmentation on sd21-unclip-tiny; the image is the same with the
default executors and with `--executors 0` from a fresh workspace (serve builds the demo files on its first start),
and the image conditioning changes it. The model-level numbers are ComfyUI 0.3.64's (tests/models/test_unclip.py)."""

from __future__ import annotations

import json

import numpy as np

from tests.e2e.test_sdxl_revision_workflow import _serve_and_render

PROMPT = {
    "ckpt": {"class_type": "unCLIPCheckpointLoader", "inputs": {"ckpt_name": "sd21-unclip-tiny.safetensors"}},
    "image": {"class_type": "LoadImage", "inputs": {"image": "example.png"}},
    "encode": {
        "class_type": "CLIPVisionEncode",
        "inputs": {"clip_vision": ["ckpt", 3], "image": ["image", 0], "crop": "center"},
    },
    "pos": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["ckpt", 1], "text": "a house by a lake"}},
    "neg": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["ckpt", 1], "text": ""}},
    "unclip": {
        "class_type": "unCLIPConditioning",
        "inputs": {
            "conditioning": ["pos", 0],
            "clip_vision_output": ["encode", 0],
            "strength": 1.0,
            "noise_augmentation": 0.2,
        },
    },
    "latent": {"class_type": "EmptyLatentImage", "inputs": {"width": 96, "height": 64, "batch_size": 1}},
    "sampler": {
        "class_type": "KSampler",
        "inputs": {
            "model": ["ckpt", 0],
            "seed": 3,
            "steps": 3,
            "cfg": 5.0,
            "sampler_name": "euler_ancestral",
            "scheduler": "normal",
            "positive": ["unclip", 0],
            "negative": ["neg", 0],
            "latent_image": ["latent", 0],
            "denoise": 1.0,
        },
    },
    "decode": {"class_type": "VAEDecode", "inputs": {"samples": ["sampler", 0], "vae": ["ckpt", 2]}},
    "save": {"class_type": "SaveImage", "inputs": {"images": ["decode", 0], "filename_prefix": "unclip"}},
}


def test_unclip_checkpoint_renders_the_same_in_both_executor_modes(tmp_path) -> None:
    plain = json.loads(json.dumps(PROMPT))
    plain["sampler"]["inputs"]["positive"] = ["pos", 0]
    workspace = tmp_path / "fresh"
    default = _serve_and_render(workspace, tmp_path / "default.log", {"unclip": PROMPT, "plain": plain})
    in_process = _serve_and_render(workspace, tmp_path / "executors0.log", {"unclip": PROMPT}, "--executors", "0")
    image = default["unclip"]
    assert image.shape == (64, 96, 3) and image.std() > 0
    assert np.array_equal(image, in_process["unclip"]), (
        f"{int((image != in_process['unclip']).sum())} values differ between the executor modes"
    )
    assert not np.array_equal(image, default["plain"])
