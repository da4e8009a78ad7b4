"""GLIGEN through the cluster: a text-to-image workflow on sd1-gligen-tiny whose prompt carries two GLIGEN text boxes
(GLIGENLoader, GLIGENTextBoxApply chained) renders the same image with the default executors and with
`--executors 0`, from a fresh workspace (serve builds the demo files on its first start), and the boxes change it.
The model-level numbers are ComfyUI 0.3.64's (tests/models/test_gligen.py)."""

from __future__ import annotations

import json

import numpy as np

from tests.e2e.test_sdxl_revision_workflow import _serve_and_render

PROMPT = {
    "ckpt": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sd1-gligen-tiny.safetensors"}},
    "gligen": {"class_type": "GLIGENLoader", "inputs": {"gligen_name": "gligen-sd1-tiny.safetensors"}},
    "pos": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["ckpt", 1], "text": "a garden"}},
    "neg": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["ckpt", 1], "text": "blurry"}},
    "box1": {
        "class_type": "GLIGENTextBoxApply",
        "inputs": {
            "conditioning_to": ["pos", 0],
            "clip": ["ckpt", 1],
            "gligen_textbox_model": ["gligen", 0],
            "text": "a cat",
            "width": 48,
            "height": 64,
            "x": 8,
            "y": 0,
        },
    },
    "box2": {
        "class_type": "GLIGENTextBoxApply",
        "inputs": {
            "conditioning_to": ["box1", 0],
            "clip": ["ckpt", 1],
            "gligen_textbox_model": ["gligen", 0],
            "text": "a red ball",
            "width": 32,
            "height": 24,
            "x": 64,
            "y": 72,
        },
    },
    "latent": {"class_type": "EmptyLatentImage", "inputs": {"width": 128, "height": 96, "batch_size": 1}},
    "sampler": {
        "class_type": "KSampler",
        "inputs": {
            "model": ["ckpt", 0],
            "seed": 5,
            "steps": 4,
            "cfg": 6.0,
            "sampler_name": "dpmpp_2m",
            "scheduler": "karras",
            "positive": ["box2", 0],
            "negative": ["neg", 0],
            "latent_image": ["latent", 0],
            "denoise": 1.0,
        },
    },
    "decode": {"class_type": "VAEDecode", "inputs": {"samples": ["sampler", 0], "vae": ["ckpt", 2]}},
    "save": {"class_type": "SaveImage", "inputs": {"images": ["decode", 0], "filename_prefix": "gligen"}},
}


def test_text_boxes_render_the_same_in_both_executor_modes(tmp_path) -> None:
    plain = json.loads(json.dumps(PROMPT))
    plain["sampler"]["inputs"]["positive"] = ["pos", 0]
    workspace = tmp_path / "fresh"
    default = _serve_and_render(workspace, tmp_path / "default.log", {"boxes": PROMPT, "plain": plain})
    in_process = _serve_and_render(workspace, tmp_path / "executors0.log", {"boxes": PROMPT}, "--executors", "0")
    image = default["boxes"]
    assert image.shape == (96, 128, 3) and image.std() > 0
    assert np.array_equal(image, in_process["boxes"]), (
        f"{int((image != in_process['boxes']).sum())} values differ between the executor modes"
    )
    assert not np.array_equal(image, default["plain"])
