"""Tiny SeedVR2 files for `demo-models`, in the published layouts.

- The VAE (ema_vae_fp16.safetensors, which the templates load as vae/seedvr2_ema_vae_fp16.safetensors;
  nodes.models.seedvr2_vae): the encoder's and decoder's four blocks 32, 32, 32 and 64 wide (the release's are 128,
  256, 512, 512), 16 latent channels as released, float16 like the release.
- The transformers (nodes.models.seedvr2_dit): the 3B's 32 blocks and the 7B's 36 (the block count is what tells
  them apart, as in ComfyUI), 32 wide with 2 heads of 16 (the release's 2560 / 20 x 128 and 3072 / 24 x 128), two
  rotary frequencies per axis, and the 58 x 5120 / 64 x 5120 text embeddings SeedVR2Conditioning reads. The 7B is
  the shared-weights SwiGLU layout (separate weights in the first 10 blocks).

Same seed -> same bytes."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.seedvr2_dit import BLOCKS_3B, BLOCKS_7B, SeedVR2DiT, SeedVR2DiTSpec
from nodes.models.seedvr2_vae import SeedVR2VAEModule
from nodes.output_claims import write_atomic

SEED = 39
VAE_FILE = "vae/seedvr2_ema_vae_fp16_tiny.safetensors"
WIDTHS = (32, 32, 32, 64)
TRANSFORMER_FILES = {
    "3b": "diffusion_models/seedvr2_3b_tiny.safetensors",
    "7b": "diffusion_models/seedvr2_7b_tiny.safetensors",
}
TRANSFORMER_SEEDS = {"3b": 3803, "7b": 3807, "7b_separate": 3809}


def tiny_dit_spec(variant: str) -> SeedVR2DiTSpec:
    """'3b', '7b' (shared weights after block 10, SwiGLU) or '7b_separate' (own weights everywhere, GELU)."""
    blocks = BLOCKS_3B if variant == "3b" else BLOCKS_7B
    separate_blocks = BLOCKS_7B if variant == "7b_separate" else 10
    return SeedVR2DiTSpec(
        width=32,
        heads=2,
        head_dim=16,
        blocks=blocks,
        in_channels=33,
        text_width=5120,
        separate=tuple(i < separate_blocks for i in range(blocks)),
        swiglu=variant != "7b_separate",
        qkv_bias=False,
        rope_pairs=2,
        output_norm=variant == "3b",
    )


def tiny_dit_state_dict(variant: str) -> dict[str, torch.Tensor]:
    seed = TRANSFORMER_SEEDS[variant]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = SeedVR2DiT(tiny_dit_spec(variant))
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in module.named_parameters():  # AdaSingle's learned modulation starts at 0 / 1
                if p.ndim == 1 and name.split(".")[-1].split("_")[-1] in ("shift", "scale", "gate"):
                    p.add_(0.2 * torch.randn(p.shape, generator=gen))
            module.positive_conditioning.normal_(generator=gen)
            module.negative_conditioning.normal_(generator=gen)
        randomize_constants(module, gen)
    return {k: v.contiguous().to(torch.float16) for k, v in module.state_dict().items()}


def build_demo_seedvr2_transformers(models_dir: Path) -> list[Path]:
    """Write the tiny 3B and 7B transformers under a ComfyUI models folder; returns the paths written."""
    written = []
    for variant, name in TRANSFORMER_FILES.items():
        path = Path(models_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        sd = tiny_dit_state_dict(variant)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written


def tiny_vae_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = SeedVR2VAEModule(WIDTHS)
        gen = torch.Generator().manual_seed(seed)
        randomize_constants(module, gen)
    return {k: v.contiguous().to(torch.float16) for k, v in module.state_dict().items()}


def build_demo_seedvr2(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the tiny SeedVR2 VAE under a ComfyUI models folder; returns the paths written."""
    path = Path(models_dir) / VAE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    sd = tiny_vae_state_dict(seed)
    write_atomic(path, lambda tmp: save_file(sd, tmp, metadata={"format": "pt"}))
    return [path]
