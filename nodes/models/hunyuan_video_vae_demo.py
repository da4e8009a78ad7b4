"""hunyuan-video-vae-tiny: a deterministic tiny HunyuanVideo 1.0 VAE in the published layout (the names
hunyuan_video_vae_bf16.safetensors carries, bfloat16 as published) as vae/hunyuan_video_vae_tiny.safetensors, the
stand-in for Kandinsky 5's video templates' VAE: base width 32 (GroupNorm's 32 groups), levels (1, 2, 2, 2), one
block per level (ComfyUI fixes 128 x (1, 2, 4, 4) and 2; its recorder gives it these from the file), 16 latent
channels. Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.hunyuan_video_vae import HunyuanVideoAutoencoder
from nodes.output_claims import write_atomic

SEED = 11
FILE = "vae/hunyuan_video_vae_tiny.safetensors"
TINY = {"ch": 32, "mult": (1, 2, 2, 2), "blocks": 1, "z_channels": 16, "embed_dim": 16}


def tiny_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    module = HunyuanVideoAutoencoder(**TINY)
    randomize_constants(module, torch.Generator().manual_seed(seed + 1))
    return {k: v.to(torch.bfloat16).contiguous() for k, v in module.state_dict().items()}


def build_demo_hunyuan_video_vae(models_dir: Path) -> list[Path]:
    path = Path(models_dir) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda tmp: save_file(tiny_state_dict(), str(tmp), metadata={"format": "pt"}))
    return [path]
