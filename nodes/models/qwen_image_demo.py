"""qwen-image-tiny: a deterministic tiny Qwen-Image written as ComfyUI users have the real one, three files
in ComfyUI's repackaged layouts, bfloat16 like the released bf16 files:
- diffusion_models/qwen_image_tiny.safetensors: the MMDiT in diffusers' names (2 blocks, one 128-wide head);
- text_encoders/qwen_2.5_vl_7b_tiny.safetensors: a Qwen2.5-VL language model (`model.*`) with the real
  152,064-token vocabulary, 32 wide, 2 layers, ComfyUI's 128-wide heads (2 query heads, 1 key/value head);
- vae/qwen_image_vae_tiny.safetensors: the Wan 2.1 VAE in Wan's layout, Wan 2.1's structure at base width 8.
The widths follow the rules the loaders infer with (128-wide heads), so nothing else describes the files.
Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import AutoencoderKLQwenImage, QwenImageTransformer2DModel
from safetensors.torch import save_file
from transformers import Qwen2Config, Qwen2Model

from nodes.models.flux_demo import randomize_constants
from nodes.models.qwen_image_text import HEAD_DIM, RMS_EPS, ROPE_THETA
from nodes.models.qwen_image_vae import diffusers_to_wan
from nodes.output_claims import write_atomic

SEED = 7
VOCAB = 152_064  # Qwen2.5-VL-7B's embedding rows (the tokenizer's 151,665 ids and padding)
TEXT_WIDTH = 32
FILES = {
    "transformer": "diffusion_models/qwen_image_tiny.safetensors",
    "text_encoder": "text_encoders/qwen_2.5_vl_7b_tiny.safetensors",
    "vae": "vae/qwen_image_vae_tiny.safetensors",
}


def _text_encoder() -> Qwen2Model:
    return Qwen2Model(
        Qwen2Config(
            vocab_size=VOCAB,
            hidden_size=TEXT_WIDTH,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=HEAD_DIM,
            rope_theta=ROPE_THETA,
            rms_norm_eps=RMS_EPS,
        )
    )


def tiny_qwen_image_state_dicts(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    """The tiny model's three files' tensors, in ComfyUI's layouts and bfloat16."""
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
        )
        text = _text_encoder()
        vae = AutoencoderKLQwenImage(base_dim=8, z_dim=16)
        for m in (transformer, text, vae):
            randomize_constants(m, gen)  # zero-initialised outputs (proj_out, norms) would hide key mix-ups
    sds = {
        "transformer": transformer.state_dict(),
        "text_encoder": {f"model.{k}": v for k, v in text.state_dict().items()},
        "vae": diffusers_to_wan(vae.state_dict()),
    }
    return {name: {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()} for name, sd in sds.items()}


def build_demo_qwen_image(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write qwen-image-tiny under a ComfyUI models folder; returns the paths written."""
    written = []
    for name, sd in tiny_qwen_image_state_dicts(seed).items():
        path = Path(models_dir) / FILES[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written
