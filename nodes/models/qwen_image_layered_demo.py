"""qwen-image-layered-tiny: a deterministic tiny Qwen-Image-Layered in ComfyUI's repackaged layouts
(Comfy-Org/Qwen-Image-Layered_ComfyUI), bfloat16 like the released bf16 files:
- diffusion_models/qwen_image_layered_tiny.safetensors: qwen-image-tiny's MMDiT widths (2 blocks, one 128-wide
  head, 32-wide text) plus the layered model's `time_text_embed.addition_t_embedding` (2 rows), the key ComfyUI
  detects the layered model by;
- vae/qwen_image_layered_vae_tiny.safetensors: the RGBA Wan 2.1 VAE (4 image channels) in Wan's layout at base
  width 8.
The text encoder is qwen-image-tiny's (text_encoders/qwen_2.5_vl_7b_tiny.safetensors, written by
nodes.models.qwen_image_demo). Its own seed stream: the other tiny files stay byte-identical."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import AutoencoderKLQwenImage, QwenImageTransformer2DModel
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.qwen_image_demo import TEXT_WIDTH
from nodes.models.qwen_image_text import HEAD_DIM
from nodes.models.qwen_image_vae import diffusers_to_wan
from nodes.output_claims import write_atomic

SEED = 38
RGBA = 4
FILES = {
    "transformer": "diffusion_models/qwen_image_layered_tiny.safetensors",
    "vae": "vae/qwen_image_layered_vae_tiny.safetensors",
}


def tiny_qwen_image_layered_state_dicts(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    """The two files' tensors, in ComfyUI's layouts and bfloat16."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        transformer = QwenImageTransformer2DModel(
            patch_size=2,
            in_channels=64,
            out_channels=16,
            num_layers=2,
            attention_head_dim=HEAD_DIM,
            num_attention_heads=1,
            joint_attention_dim=TEXT_WIDTH,
            use_additional_t_cond=True,
        )
        vae = AutoencoderKLQwenImage(base_dim=8, z_dim=16, input_channels=RGBA)
        for m in (transformer, vae):
            randomize_constants(m, gen)  # zero-initialised outputs (proj_out, norms) would hide key mix-ups
    sds = {"transformer": transformer.state_dict(), "vae": diffusers_to_wan(vae.state_dict())}
    return {name: {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()} for name, sd in sds.items()}


def build_demo_qwen_image_layered(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write qwen-image-layered-tiny under a ComfyUI models folder; returns the paths written."""
    written = []
    for name, sd in tiny_qwen_image_layered_state_dicts(seed).items():
        path = Path(models_dir) / FILES[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written
