"""A tiny SeedVR2 VAE for `demo-models`, in the published layout (ema_vae_fp16.safetensors, which the templates load
as vae/seedvr2_ema_vae_fp16.safetensors; nodes.models.seedvr2_vae): the encoder's and decoder's four blocks 32, 32, 32
and 64 wide (the release's are 128, 256, 512, 512), 16 latent channels as released, float16 like the release.
Same seed -> same bytes."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.seedvr2_vae import SeedVR2VAEModule
from nodes.output_claims import write_atomic

SEED = 39
VAE_FILE = "vae/seedvr2_ema_vae_fp16_tiny.safetensors"
WIDTHS = (32, 32, 32, 64)


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
