"""alibaba-pai's Qwen-Image-2512 Fun ControlNet Union (issue 38): qwen-image-tiny steered by the tiny Fun ControlNet
samples and decodes as ComfyUI does with the same files and inputs (tests/nodes/fixtures/
comfyui_qwen_fun_controlnet.json, recorded by scripts/record_comfyui_qwen_fun_controlnet.py: the newest ComfyUI's
Fun model class run on ComfyUI 0.3.64's Qwen-Image model): at strength 1 on a control image of another size than
the latent's pixels, and at 0.64 over the first half of the steps. The file is detected as a Qwen-Image ControlNet;
bad uses are named."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.recorded_tensors import at_recorded, pixels, tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_qwen_fun_controlnet.json").read_text())
FOLDERS = {
    "qwen_image_tiny.safetensors": "diffusion_models",
    "qwen_image_vae_tiny.safetensors": "vae",
    "qwen_image_2512_fun_controlnet_union_tiny.safetensors": "controlnet",
}
FUN = "qwen_image_2512_fun_controlnet_union_tiny.safetensors"


def inputs(image_hw: list[int]) -> dict[str, torch.Tensor]:
    """The recorder's inputs (scripts/record_comfyui_qwen_fun_controlnet.py: inputs), drawn in the same order."""
    gen = torch.Generator().manual_seed(4321)
    context = torch.randn(1, 8, 32, generator=gen)
    negative = torch.randn(1, 5, 32, generator=gen)
    image = torch.rand(1, *image_hw, 3, generator=gen)
    return {"context": context, "negative": negative, "image": image}


def test_demo_files_are_the_recorded_ones_and_detected(demo_workspace) -> None:
    from nodes.models.detect import probe

    for name, digest in FIXTURE["files"].items():
        path = demo_workspace.models_dir / FOLDERS[name] / name
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, name
    info = probe(demo_workspace.models_dir / "controlnet" / FUN)
    assert (info.arch, info.kind, set(info.components), info.layout) == (
        "qwen_image",
        "controlnet",
        {"controlnet"},
        "fun",
    )


async def _sample(case: dict) -> tuple[torch.Tensor, torch.Tensor]:
    from nodes.latent import EmptySD3LatentImage
    from nodes.library.model_advanced import ModelSamplingAuraFlow
    from nodes.loaders import ControlNetLoader, UNETLoader, VAELoader
    from nodes.model_nodes import ControlNetApplyAdvanced, KSampler, VAEDecode

    t = inputs(case["image_hw"])
    assert {k: float(v.double().sum()) for k, v in t.items()} == case["input_sums"]
    s = FIXTURE["sampling"]
    (unet,) = UNETLoader().load_unet("qwen_image_tiny.safetensors", "default")
    (vae,) = VAELoader().load_vae("qwen_image_vae_tiny.safetensors")
    (model,) = ModelSamplingAuraFlow().patch_aura(unet, s["shift"])
    positive, negative = [[t["context"], {}]], [[t["negative"], {}]]
    for strength, start, end in case["controls"]:
        (cn,) = ControlNetLoader().load_controlnet(FUN)
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
    latent = at_recorded(latent.reshape(case["latent"]["shape"]), case["latent"])
    err = float((latent - expected).abs().max())
    assert err <= 1e-5, f"latent differs from ComfyUI's by {err:.2e}"
    if case["controls"]:  # the ControlNet acts: the result is not the uncontrolled one
        assert float((expected - tensor(FIXTURE["cases"]["no_control"]["latent"])).abs().max()) > 1e-2
    ours = np.clip(255.0 * image.float().numpy(), 0, 255).astype(np.uint8)
    theirs = pixels(case["image"])
    assert np.abs(at_recorded(ours, case["image"]).astype(int) - theirs.astype(int)).max() <= 1


def test_bad_uses_are_named(demo_workspace) -> None:
    """Without a VAE (ComfyUI: 'This Controlnet needs a VAE') and a file without ComfyUI's five control blocks:
    refused, naming what is wrong."""
    from nodes.latent import EmptySD3LatentImage
    from nodes.loaders import ControlNetLoader, UNETLoader
    from nodes.model_nodes import ControlNetApplyAdvanced, KSampler
    from nodes.models.qwen_image_fun_controlnet import infer_config

    t = inputs([32, 32])
    (unet,) = UNETLoader().load_unet("qwen_image_tiny.safetensors", "default")
    (fun,) = ControlNetLoader().load_controlnet(FUN)
    (latent,) = EmptySD3LatentImage().generate(32, 32, 1)
    cond = [[t["context"], {}]]

    def sample(positive):
        return asyncio.run(KSampler().sample(unet, 1, 1, 1.0, "euler", "simple", positive, cond, latent, 1.0))

    no_vae, _ = ControlNetApplyAdvanced().apply_controlnet(cond, cond, fun, t["image"], 1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="this Qwen-Image ControlNet needs a VAE"):
        sample(no_vae)
    three_blocks = {
        "control_img_in.weight": torch.zeros(128, 132),
        "control_blocks.0.attn.norm_q.weight": torch.zeros(128),
        "control_blocks.0.attn.to_q.weight": torch.zeros(128, 128),
        **{f"control_blocks.{i}.after_proj.weight": torch.zeros(128, 128) for i in range(3)},
    }
    with pytest.raises(ValueError, match="control blocks \\[0, 1, 2\\]; ComfyUI's model has 5"):
        infer_config(three_blocks)


def test_the_template_file_maps_to_the_tiny_fun_controlnet() -> None:
    from scripts import templates_render

    asked = ["Qwen-Image-2512-Fun-Controlnet-Union-2602.safetensors", "qwen_image_2512_fp8_e4m3fn.safetensors"]
    assert [templates_render.demo_file(n, asked) for n in asked] == [FUN, "qwen_image_tiny.safetensors"]
