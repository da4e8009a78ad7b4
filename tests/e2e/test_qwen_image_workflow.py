"""Qwen-Image's demo workflow (workflows_json/qwen_image.json: UNETLoader, CLIPLoader qwen_image, VAELoader,
ModelSamplingAuraFlow, EmptySD3LatentImage, KSampler, as ComfyUI's Qwen-Image template) from a fresh, empty
workspace: `serve` builds qwen-image-tiny on its first start, and the image is the same with the default
executors and with `--executors 0`, and ComfyUI 0.3.64's image of the same workflow on the same files
(recorded by scripts/record_comfyui_qwen_image.py) to within 1/255."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.e2e.served import assert_within_1_of_255, comfyui_images, render_in_both_modes
from tests.recorded_tensors import load_json

REPO = Path(__file__).resolve().parents[2]
FIXTURE = load_json(REPO / "tests" / "models" / "fixtures" / "comfyui_qwen_image.json.xz")
RECORDED = FIXTURE["workflow"]
# Variants whose sampler draws noise at every step, recorded on ComfyUI 0.10.0 (its CPU noise sampler takes
# seed + 1, 0.3.64's the seed): these replace 0.3.64's recordings of the same variants.
FIXTURE_010 = json.loads((REPO / "tests" / "models" / "fixtures" / "comfyui_qwen_image_010.json").read_text())
VARIANTS = {**FIXTURE["variants"], **FIXTURE_010["variants"]}


def test_recorded_workflow_is_the_shipped_one() -> None:
    assert RECORDED["prompt"] == json.loads((REPO / "workflows_json" / "qwen_image.json").read_text())


def test_qwen_image_workflow_from_a_fresh_workspace_in_both_executor_modes(tmp_path) -> None:
    default = render_in_both_modes(tmp_path, json.loads((REPO / "workflows_json" / "qwen_image.json").read_text()))
    assert (tmp_path / "fresh" / "models" / "diffusion_models" / "qwen_image_tiny.safetensors").is_file()
    assert default.shape == (96, 128, 3) and default.std() > 0
    assert_within_1_of_255(default, comfyui_images(RECORDED)[0])


def test_qwen_image_latents_have_comfyuis_frame_axis(demo_workspace, fixed_threads) -> None:
    """KSampler gives ComfyUI's [B,16,1,h,w] for Qwen-Image (the shape it recorded for the workflow); such a
    latent decodes (plain and tiled), VAEEncode gives one back, and a second KSampler pass takes it."""
    import asyncio

    from nodes.latent import EmptySD3LatentImage
    from nodes.library.model_advanced import ModelSamplingAuraFlow
    from nodes.library.vae_tiled import VAEEncodeTiled
    from nodes.loaders import CLIPLoader, UNETLoader, VAELoader
    from nodes.model_nodes import CLIPTextEncode, KSampler, VAEDecode, VAEDecodeTiled, VAEEncode

    async def go():
        (unet,) = UNETLoader().load_unet("qwen_image_tiny.safetensors", "default")
        (model,) = ModelSamplingAuraFlow().patch_aura(unet, 3.1)
        (clip,) = CLIPLoader().load_clip("qwen_2.5_vl_7b_tiny.safetensors", "qwen_image")
        (vae,) = VAELoader().load_vae("qwen_image_vae_tiny.safetensors")
        (pos,) = await CLIPTextEncode().encode(clip, "a red fox")
        (neg,) = await CLIPTextEncode().encode(clip, " ")
        (empty,) = EmptySD3LatentImage().generate(128, 96, 1)
        common = dict(cfg=2.5, sampler_name="euler", scheduler="simple", positive=pos, negative=neg)
        (first,) = await KSampler().sample(model, 42, 3, latent_image=empty, denoise=1.0, **common)
        (image,) = await VAEDecode().decode(vae, first)
        (tiled_image,) = await VAEDecodeTiled().decode(vae, first, 64, 16)
        (encoded,) = await VAEEncode().encode(vae, image)
        (encoded_tiled,) = await VAEEncodeTiled().encode(vae, image, 64, 16)
        (second,) = await KSampler().sample(model, 7, 3, latent_image=encoded, denoise=0.5, **common)
        return first["samples"], image, tiled_image, encoded["samples"], encoded_tiled["samples"], second["samples"]

    first, image, tiled_image, encoded, encoded_tiled, second = asyncio.run(go())
    assert list(first.shape) == RECORDED["latent_shape"] == [1, 16, 1, 12, 16]
    assert image.shape == tiled_image.shape == (1, 96, 128, 3)
    assert encoded.shape == encoded_tiled.shape == second.shape == first.shape
    assert not torch.equal(second, encoded)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_workflow_variants_give_comfyuis_images(demo_workspace, fixed_threads, variant: str) -> None:
    """Variants of the workflow ComfyUI ran too: odd latent sizes with a batch of two, the model's own sampling
    (ModelSamplingFlux 1.15) with dpmpp_2m/karras, cfg 1 with euler_ancestral/beta and a prompt with weighting
    syntax (kept as text), and a second pass given the first image as two ReferenceLatents of different sizes.
    Every image within 1/255 of ComfyUI's."""
    import asyncio

    from PIL import Image

    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    assert FIXTURE_010["files"] == FIXTURE["files"], "the two recordings were made on different files"
    recorded = VARIANTS[variant]
    paths = asyncio.run(run_prompt(recorded["prompt"], None, build_registry(demo_workspace), show_progress=False))
    ours = [np.asarray(Image.open(p)) for p in paths]
    theirs = comfyui_images(recorded)
    assert [a.shape for a in ours] == [b.shape for b in theirs]
    for a, b in zip(ours, theirs):
        assert_within_1_of_255(a, b)
