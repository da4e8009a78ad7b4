"""ModelPatchLoader and QwenImageDiffsynthControlnet (issue 38): qwen-image-tiny steered by the tiny DiffSynth
ControlNets samples and decodes as ComfyUI 0.3.64 does with the same files and inputs
(tests/nodes/fixtures/comfyui_qwen_diffsynth.json.xz, recorded by scripts/record_comfyui_qwen_diffsynth.py): a control
image of another size than the latent's pixels (re-encoded scaled), of the same size, a negative strength, the inpaint
layout with and without a mask, two patches chained. Bad inputs are named."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.float_tolerance import ulps_of_largest
from tests.recorded_tensors import load_json, pixels, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_qwen_diffsynth.json.xz")
FOLDERS = {
    "qwen_image_tiny.safetensors": "diffusion_models",
    "qwen_image_vae_tiny.safetensors": "vae",
    "qwen_image_diffsynth_tiny.safetensors": "model_patches",
    "qwen_image_inpaint_diffsynth_tiny.safetensors": "model_patches",
    "qwen_2.5_vl_7b_tiny.safetensors": "text_encoders",
}


def inputs(image_hw: list[int]) -> dict[str, torch.Tensor]:
    """The recorder's inputs (scripts/record_comfyui_qwen_diffsynth.py: inputs), drawn in the same order."""
    gen = torch.Generator().manual_seed(1234)
    context = torch.randn(1, 8, 32, generator=gen)
    negative = torch.randn(1, 5, 32, generator=gen)
    image = torch.rand(1, *image_hw, 3, generator=gen)
    mask = (torch.rand(1, *image_hw, generator=gen) > 0.5).float()
    return {"context": context, "negative": negative, "image": image, "mask": mask}


def test_demo_files_are_the_recorded_ones(demo_workspace) -> None:
    for name, digest in FIXTURE["files"].items():
        path = demo_workspace.models_dir / FOLDERS[name] / name
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, name


async def _sample(case: dict) -> tuple[torch.Tensor, torch.Tensor]:
    from nodes.latent import EmptySD3LatentImage
    from nodes.library.model_advanced import ModelSamplingAuraFlow
    from nodes.library.model_patch import ModelPatchLoader, QwenImageDiffsynthControlnet
    from nodes.loaders import UNETLoader, VAELoader
    from nodes.model_nodes import KSampler, VAEDecode

    t = inputs(case["image_hw"])
    assert {k: float(v.double().sum()) for k, v in t.items()} == case["input_sums"]
    s = FIXTURE["sampling"]
    (unet,) = UNETLoader().load_unet("qwen_image_tiny.safetensors", "default")
    (vae,) = VAELoader().load_vae("qwen_image_vae_tiny.safetensors")
    (model,) = ModelSamplingAuraFlow().patch_aura(unet, s["shift"])
    for name, strength, masked in case["patches"]:
        (patch,) = ModelPatchLoader().load_model_patch(name)
        (model,) = QwenImageDiffsynthControlnet().diffsynth_controlnet(
            model, patch, vae, t["image"], strength, t["mask"] if masked else None
        )
    (latent,) = EmptySD3LatentImage().generate(*FIXTURE["size"], 1)
    (out,) = await KSampler().sample(
        model,
        s["seed"],
        s["steps"],
        s["cfg"],
        s["sampler_name"],
        s["scheduler"],
        [[t["context"], {}]],
        [[t["negative"], {}]],
        latent,
        denoise=1.0,
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
    # 1e-5, or 16 float32 ulps of the largest value where that is more (as tests/nodes/comfyui_fixtures.py bounds
    # recorded latents): recorded on another CPU, the latents (largest 12.4 to 13.3) came out 4.3e-6 to 1.0e-5 apart on
    # an AVX-512 one, at most 10.5 ulps
    bound = max(1e-5, ulps_of_largest(expected, 16))
    assert err <= bound, f"latent differs from ComfyUI's by {err:.2e}"
    if case["patches"]:  # the patch acts: the result is not the unpatched one
        assert float((expected - tensor(FIXTURE["cases"]["no_patch"]["latent"])).abs().max()) > 1e-2
    ours = np.clip(255.0 * image.float().numpy(), 0, 255).astype(np.uint8)
    rec = case["image_u8"]
    theirs = pixels(rec)
    assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1


def test_bad_inputs_are_named(demo_workspace, tmp_path) -> None:
    from nodes.library.model_patch import ModelPatchLoader, QwenImageDiffsynthControlnet
    from nodes.loaders import CheckpointLoaderSimple, UNETLoader, VAELoader

    with pytest.raises(FileNotFoundError, match="name: 'missing.safetensors'"):
        ModelPatchLoader().load_model_patch("missing.safetensors")
    (patch,) = ModelPatchLoader().load_model_patch("qwen_image_diffsynth_tiny.safetensors")
    (unet,) = UNETLoader().load_unet("qwen_image_tiny.safetensors", "default")
    (vae,) = VAELoader().load_vae("qwen_image_vae_tiny.safetensors")
    image = torch.rand(1, 64, 64, 3)
    node = QwenImageDiffsynthControlnet()
    with pytest.raises(ValueError, match="model_patch: expected a MODEL_PATCH"):
        node.diffsynth_controlnet(unet, vae, vae, image, 1.0)
    with pytest.raises(ValueError, match="image: expected an IMAGE"):
        node.diffsynth_controlnet(unet, patch, vae, torch.rand(64, 64), 1.0)
    with pytest.raises(ValueError, match="mask: expected a MASK"):
        node.diffsynth_controlnet(unet, patch, vae, image, 1.0, mask=torch.rand(1, 1, 1, 64, 64))
    sd1, _, _ = CheckpointLoaderSimple().load_checkpoint("sd1-tiny.safetensors")
    with pytest.raises(ValueError, match="model: a DiffSynth ControlNet patches Qwen-Image models, not sd1"):
        node.diffsynth_controlnet(sd1, patch, vae, image, 1.0)


def test_unknown_and_incomplete_patch_files_are_named(demo_workspace) -> None:
    """A file of no kind ComfyUI loads, and files of a known kind missing the modules that kind needs (the Anima
    LLLite is loaded now, so a file with only its conditioning encoder is refused as incomplete, not as unsupported)."""
    from safetensors.torch import save_file

    from nodes.library.model_patch import ModelPatchLoader

    folder = demo_workspace.models_dir / "model_patches"
    save_file({"something.weight": torch.zeros(2)}, folder / "not_a_patch_test.safetensors")
    save_file({"feature_embedder.mid_layer_norm.bias": torch.zeros(2)}, folder / "uso_projector_test.safetensors")
    save_file({"lllite_conditioning1.conv1.weight": torch.zeros(2)}, folder / "lllite_test.safetensors")
    try:
        with pytest.raises(ValueError, match="no model patch ComfyUI knows"):
            ModelPatchLoader().load_model_patch("not_a_patch_test.safetensors")
        with pytest.raises(ValueError, match="is an incomplete USO style projector"):
            ModelPatchLoader().load_model_patch("uso_projector_test.safetensors")
        with pytest.raises(ValueError, match="is an Anima LLLite file without lllite_dit_blocks_\\* modules"):
            ModelPatchLoader().load_model_patch("lllite_test.safetensors")
    finally:
        (folder / "not_a_patch_test.safetensors").unlink()
        (folder / "uso_projector_test.safetensors").unlink()
        (folder / "lllite_test.safetensors").unlink()


def test_a_node_packs_own_sampler_refuses_the_patch(demo_workspace) -> None:
    """A pack's sampler function evaluates the model step by step outside the sampling loop that encodes the control
    image (nodes.guided_evaluation): the patch would be left out there, so it is refused by name."""
    from nodes.guided_evaluation import guided_evaluation
    from nodes.ksampler import GuiderChoice
    from nodes.library.model_patch import ModelPatchLoader, QwenImageDiffsynthControlnet
    from nodes.loaders import UNETLoader, VAELoader

    (patch,) = ModelPatchLoader().load_model_patch("qwen_image_diffsynth_tiny.safetensors")
    (unet,) = UNETLoader().load_unet("qwen_image_tiny.safetensors", "default")
    (vae,) = VAELoader().load_vae("qwen_image_vae_tiny.safetensors")
    (model,) = QwenImageDiffsynthControlnet().diffsynth_controlnet(unet, patch, vae, torch.rand(1, 64, 64, 3), 1.0)
    cond = [[torch.zeros(1, 4, 32), {}]]
    guider = GuiderChoice(model, cond, cond, 2.0)
    with pytest.raises(ValueError, match="model: a DiffSynth ControlNet patch is not supported under a node pack's"):
        guided_evaluation(guider, torch.tensor([1.0, 0.0]), torch.zeros(1, 16, 8, 8), 0)
    guided_evaluation(GuiderChoice(unet, cond, cond, 2.0), torch.tensor([1.0, 0.0]), torch.zeros(1, 16, 8, 8), 0)
