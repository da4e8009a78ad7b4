"""qwen-image-2.1-tiny: a deterministic tiny Qwen-Image 2.1 written as ComfyUI users have the real one (the files
Comfy-Org/Qwen-Image-2.1 publishes), three files in ComfyUI's layouts, bfloat16 like the released bf16 files:
- diffusion_models/qwen_image_2.1_tiny.safetensors: the single-stream DiT in ComfyUI's names (diffusers' with the
  SwiGLU gate and up projections fused into `img_mlp.gate_up`, gate rows first), 2 blocks, one 128-wide head;
- text_encoders/qwen3vl_8b_tiny.safetensors: a Qwen3-VL (`model.language_model.*`, `model.visual.*`, `lm_head.*`,
  transformers' Qwen3VLForConditionalGeneration names as the published checkpoints have them) with the real
  151,936-token vocabulary, 32 wide, 2 layers; its vision tower 64 wide in ComfyUI's 16 heads, 2 blocks, one
  DeepStack merger (after block 0), 16-pixel patches, an 8x8 position table;
- vae/qwen_image_2.1_vae_tiny.safetensors: the 2.1 VAE (RGBA, 64 channels at 1/16) in the Wan 2.2 layout with
  one-frame 3-D kernels, the released structure at widths 8 (encoder) and 12 (decoder).
Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import AutoencoderKLQwenImage21, QwenImage21Transformer2DModel
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.qwen_image21_vae import to_diffusers
from nodes.models.wan_demo import wan22_vae_to_wan
from nodes.output_claims import write_atomic

SEED = 21
TEXT_WIDTH = 32
FILES = {
    "transformer": "diffusion_models/qwen_image_2.1_tiny.safetensors",
    "text_encoder": "text_encoders/qwen3vl_8b_tiny.safetensors",
    "vae": "vae/qwen_image_2.1_vae_tiny.safetensors",
}
# Kernels ComfyUI's 2.1 VAE keeps 2-D (attention projections, the spatial resampling convs); every other
# convolution is 3-D with a one-frame kernel.
_PLAIN_2D = (".to_qkv.weight", ".proj.weight", ".resample.1.weight")


def vae_to_published(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """AutoencoderKLQwenImage21 tensors -> the published file's (Wan 2.2 names, one-frame 3-D kernels);
    nodes.models.qwen_image21_vae must map them back."""
    out = {
        k: v[:, :, None] if v.dim() == 4 and not k.endswith(_PLAIN_2D) else v for k, v in wan22_vae_to_wan(sd).items()
    }
    back = to_diffusers(out)
    if back.keys() != sd.keys() or any(back[k].shape != sd[k].shape for k in sd):
        raise AssertionError("the Qwen-Image 2.1 VAE layout does not convert back")
    return out


def comfy_transformer(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' transformer names -> ComfyUI's file: gate and up projections fused (gate rows first)."""
    out = {}
    for key, value in sd.items():
        if key.endswith("img_mlp.proj.weight"):
            continue
        if key.endswith("img_mlp.gate_layer.weight"):
            key, value = key.replace("gate_layer", "gate_up"), torch.cat([value, sd[key.replace("gate_layer", "proj")]])
        out[key] = value
    return out


def _text_encoder() -> torch.nn.Module:
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    cfg = Qwen3VLConfig(
        text_config={
            "vocab_size": 151_936,
            "hidden_size": TEXT_WIDTH,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 16,
            "rope_parameters": {"rope_type": "default", "rope_theta": 5_000_000.0, "mrope_section": [24, 20, 20]},
        },
        vision_config={
            "depth": 2,
            "hidden_size": 64,
            "intermediate_size": 48,
            "num_heads": 16,  # ComfyUI's fixed count for Qwen3-VL towers
            "out_hidden_size": TEXT_WIDTH,
            "deepstack_visual_indexes": [0],
            "num_position_embeddings": 64,
        },
    )
    return Qwen3VLForConditionalGeneration(cfg)


def tiny_vae(gen: torch.Generator) -> AutoencoderKLQwenImage21:
    vae = AutoencoderKLQwenImage21(base_dim=8, decoder_base_dim=12, z_dim=64)
    randomize_constants(vae, gen)  # norm scales start at one: a skipped or swapped norm would not show
    return vae.eval()


def tiny_qwen_image21_state_dicts(seed: int = SEED) -> dict[str, dict[str, torch.Tensor]]:
    """The tiny model's three files' tensors, in ComfyUI's layouts and bfloat16."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        transformer = QwenImage21Transformer2DModel(
            in_channels=64,
            out_channels=64,
            num_layers=2,
            attention_head_dim=128,
            num_attention_heads=1,
            context_in_dim=TEXT_WIDTH,
            mlp_ratio=3,
        )
        text = _text_encoder()
        randomize_constants(transformer, gen)
        randomize_constants(text, gen)
        vae = tiny_vae(gen)
    sds = {
        "transformer": comfy_transformer(transformer.state_dict()),
        "text_encoder": text.state_dict(),
        "vae": vae_to_published(vae.state_dict()),
    }
    return {name: {k: v.to(torch.bfloat16).contiguous() for k, v in sd.items()} for name, sd in sds.items()}


def build_demo_qwen_image21(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write qwen-image-2.1-tiny under a ComfyUI models folder; returns the paths written."""
    written = []
    for name, sd in tiny_qwen_image21_state_dicts(seed).items():
        path = Path(models_dir) / FILES[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written
