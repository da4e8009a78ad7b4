"""mochi-tiny: deterministic tiny Genmo Mochi 1 preview files in Genmo's (ComfyUI's) published layout, bfloat16 as
published: diffusion_models/mochi_preview_tiny.safetensors (visual width 64 in 2 heads, text width 32, 2 blocks, the
caption pool over flux-tiny-t5's 32-wide states) and vae/mochi_vae_tiny.safetensors (the decoder under `decoder.`:
widths 64, 32, 32, 32, residual blocks 1, 1, 4, 1, 1 so that ComfyUI's marker blocks.2.blocks.3 is there, time
expansions 3, 2, 1 as released; the encoder under `encoder.`, ENCODER). ComfyUI fixes the released sizes; its recorder gives it these. Same seed ->
byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.mochi import MochiConfig, MochiNetwork
from nodes.models.mochi_vae import MochiAutoencoder
from nodes.output_claims import write_atomic

SEED = 23
DIT_FILE = "diffusion_models/mochi_preview_tiny.safetensors"
VAE_FILE = "vae/mochi_vae_tiny.safetensors"
DIT = MochiConfig(
    in_channels=12,
    out_channels=12,
    patch=2,
    hidden_x=64,
    hidden_y=32,
    heads=2,
    depth=2,
    mlp_x=256,
    mlp_y=256,
    t5_dim=32,
)
VAE = {"widths": [64, 32, 32, 32], "res_blocks": [1, 1, 4, 1, 1], "temporal": [3, 2, 1]}
# the encoder: widths 32, 64, 32, 64 (each downsampling changes the width, as Genmo's asserts), time 1, 2, 3 and
# space 2 as released, one residual block with temporal attention after each downsampling, none after the last
ENCODER = [
    ("in", 15, 32),
    ("res", 32, False),
    ("down", 32, 64, 1, 2, [True]),
    ("down", 64, 32, 2, 2, [True]),
    ("down", 32, 64, 3, 2, [True]),
]


def _bf16(module: torch.nn.Module, seed: int, prefix: str = "") -> dict[str, torch.Tensor]:
    randomize_constants(module, torch.Generator().manual_seed(seed))
    return {prefix + k: v.to(torch.bfloat16).contiguous() for k, v in module.state_dict().items()}


def tiny_dit_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    network = MochiNetwork(DIT)
    with torch.no_grad():  # learned rotary frequencies of the released file's order of size
        network.pos_frequencies.copy_(0.05 * torch.randn(network.pos_frequencies.shape))
    return _bf16(network, seed + 1)


def tiny_vae_state_dict(seed: int = SEED + 2) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return _bf16(MochiAutoencoder(VAE, ENCODER), seed + 1)


def build_demo_mochi(models_dir: Path) -> list[Path]:
    written = []
    for name, sd in ((DIT_FILE, tiny_dit_state_dict()), (VAE_FILE, tiny_vae_state_dict())):
        path = Path(models_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, str(tmp), metadata={"format": "pt"}))
        written.append(path)
    return written
