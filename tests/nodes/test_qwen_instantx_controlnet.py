"""Qwen-Image InstantX ControlNets (Union and Inpainting; issue 38): qwen-image-tiny steered by the tiny InstantX
ControlNets samples and decodes as ComfyUI 0.3.64 does with the same files and inputs
(tests/nodes/fixtures/comfyui_qwen_instantx.json.xz, recorded by scripts/record_comfyui_qwen_instantx.py): the Union one
on a control image of another size than the latent's pixels, over the first half of the steps only, the Inpainting one
with a soft mask of the image's size and of a smaller one, the two chained. The files are detected as Qwen-Image ControlNets; bad uses are named."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.recorded_tensors import load_json, pixels, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_qwen_instantx.json.xz")
FOLDERS = {
    "qwen_image_tiny.safetensors": "diffusion_models",
    "qwen_image_vae_tiny.safetensors": "vae",
    "qwen_image_instantx_union_tiny.safetensors": "controlnet",
    "qwen_image_instantx_inpainting_tiny.safetensors": "controlnet",
}
INPAINT = "qwen_image_instantx_inpainting_tiny.safetensors"


def inputs(image_hw: list[int], mask_hw: list[int]) -> dict[str, torch.Tensor]:
    """The recorder's inputs (scripts/record_comfyui_qwen_instantx.py: inputs), drawn in the same order."""
    gen = torch.Generator().manual_seed(4321)
    context = torch.randn(1, 8, 32, generator=gen)
    negative = torch.randn(1, 5, 32, generator=gen)
    image = torch.rand(1, *image_hw, 3, generator=gen)
    mask = torch.rand(1, *mask_hw, generator=gen)
    return {"context": context, "negative": negative, "image": image, "mask": mask}


def test_demo_files_are_the_recorded_ones_and_detected(demo_workspace) -> None:
    from nodes.models.detect import probe

    for name, digest in FIXTURE["files"].items():
        path = demo_workspace.models_dir / FOLDERS[name] / name
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, name
        if FOLDERS[name] == "controlnet":
            info = probe(path)
            assert (info.arch, info.kind, set(info.components)) == ("qwen_image", "controlnet", {"controlnet"})


async def _sample(case: dict) -> tuple[torch.Tensor, torch.Tensor]:
    from nodes.latent import EmptySD3LatentImage
    from nodes.library.controlnet_inpaint import ControlNetInpaintingAliMamaApply
    from nodes.library.model_advanced import ModelSamplingAuraFlow
    from nodes.loaders import ControlNetLoader, UNETLoader, VAELoader
    from nodes.model_nodes import ControlNetApplyAdvanced, KSampler, VAEDecode

    t = inputs(case["image_hw"], case["mask_hw"])
    assert {k: float(v.double().sum()) for k, v in t.items()} == case["input_sums"]
    s = FIXTURE["sampling"]
    (unet,) = UNETLoader().load_unet("qwen_image_tiny.safetensors", "default")
    (vae,) = VAELoader().load_vae("qwen_image_vae_tiny.safetensors")
    (model,) = ModelSamplingAuraFlow().patch_aura(unet, s["shift"])
    positive, negative = [[t["context"], {}]], [[t["negative"], {}]]
    for name, strength, start, end in case["controls"]:
        (cn,) = ControlNetLoader().load_controlnet(name)
        if name == INPAINT:
            positive, negative = ControlNetInpaintingAliMamaApply().apply_inpaint_controlnet(
                positive, negative, cn, vae, t["image"], t["mask"], strength, start, end
            )
        else:
            positive, negative = ControlNetApplyAdvanced().apply_controlnet(
                positive, negative, cn, t["image"], strength, start, end, vae=vae
            )
    (latent,) = EmptySD3LatentImage().generate(*FIXTURE["size"], 1)
    (out,) = await KSampler().sample(
        model, s["seed"], s["steps"], s["cfg"], s["sampler_name"], s["scheduler"], positive, negative, latent, 1.0
    )
    (image,) = await VAEDecode().decode(vae, out)
    return out["samples"], image


@pytest.mark.parametrize("name", sorted(FIXTURE["cases"]))
def test_sampling_equals_comfyui(demo_workspace, fixed_threads, name: str) -> None:
    case = FIXTURE["cases"][name]
    latent, image = asyncio.run(_sample(case))
    expected = tensor(case["latent"])
    assert latent.shape == expected.shape
    err = float((latent - expected).abs().max())
    assert err <= 1e-5, f"latent differs from ComfyUI's by {err:.2e}"
    if case["controls"]:  # the ControlNet acts: the result is not the uncontrolled one
        assert float((expected - tensor(FIXTURE["cases"]["no_control"]["latent"])).abs().max()) > 1e-2
    ours = np.clip(255.0 * image.float().numpy(), 0, 255).astype(np.uint8)
    rec = case["image_u8"]
    theirs = pixels(rec)
    assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1


def test_bad_uses_are_named(demo_workspace) -> None:
    """Without a VAE (ComfyUI: 'This Controlnet needs a VAE'), the Inpainting one without a mask, masks and images
    in batches that do not match: refused, naming what is wrong."""
    from nodes.latent import EmptySD3LatentImage
    from nodes.library.controlnet_inpaint import ControlNetInpaintingAliMamaApply
    from nodes.loaders import ControlNetLoader, UNETLoader, VAELoader
    from nodes.model_nodes import ControlNetApplyAdvanced, KSampler

    t = inputs([32, 32], [32, 32])
    (unet,) = UNETLoader().load_unet("qwen_image_tiny.safetensors", "default")
    (vae,) = VAELoader().load_vae("qwen_image_vae_tiny.safetensors")
    (union,) = ControlNetLoader().load_controlnet("qwen_image_instantx_union_tiny.safetensors")
    (inpaint,) = ControlNetLoader().load_controlnet(INPAINT)
    (latent,) = EmptySD3LatentImage().generate(32, 32, 1)
    cond = [[t["context"], {}]]

    def sample(positive):
        return asyncio.run(KSampler().sample(unet, 1, 1, 1.0, "euler", "simple", positive, cond, latent, 1.0))

    no_vae, _ = ControlNetApplyAdvanced().apply_controlnet(cond, cond, union, t["image"], 1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="this Qwen-Image ControlNet needs a VAE"):
        sample(no_vae)
    unmasked, _ = ControlNetApplyAdvanced().apply_controlnet(cond, cond, inpaint, t["image"], 1.0, 0.0, 1.0, vae=vae)
    with pytest.raises(ValueError, match="takes an image and a mask: apply it with ControlNetInpaintingAliMamaApply"):
        sample(unmasked)
    with pytest.raises(ValueError, match="mask: a batch of 2 masks for a batch of 3 images"):
        ControlNetInpaintingAliMamaApply().apply_inpaint_controlnet(
            cond, cond, inpaint, vae, t["image"].repeat(3, 1, 1, 1), torch.zeros(2, 16, 16), 1.0, 0.0, 1.0
        )
