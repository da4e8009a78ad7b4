"""A tiny USO style projector for flux-tiny and sigclip-vision-tiny (nodes.models.redux_demo), for `demo-models`:
model_patches/uso-flux1-projector-v1-tiny.safetensors in the published file's layout (`feature_embedder.*`,
nodes/models/uso_projector.py): SigLIP's 729 tokens to USO's 64 style tokens per level, from the tiny tower's
width 32 to flux-tiny's hidden width 32 (1152 and 3072 in uso-flux1-projector-v1). Same seed -> same bytes."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.redux_demo import SIGLIP_SIZES
from nodes.models.uso_projector import PREFIX, UsoStyleProjector
from nodes.output_claims import write_atomic

SEED = 29
USO_PROJECTOR = "model_patches/uso-flux1-projector-v1-tiny.safetensors"
STYLE_TOKENS = 64
FLUX_HIDDEN = 32  # flux-tiny: 2 heads of 16


def tiny_uso_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = UsoStyleProjector(SIGLIP_SIZES.side**2, STYLE_TOKENS, SIGLIP_SIZES.width, FLUX_HIDDEN)
        randomize_constants(net, torch.Generator().manual_seed(seed))  # layer norms of one would hide mix-ups
    return {f"{PREFIX}{k[len('levels.') :].replace('.', '_', 1)}": v.contiguous() for k, v in net.state_dict().items()}


def build_demo_uso(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the tiny USO projector under a ComfyUI models folder; returns the path written."""
    path = Path(models_dir) / USO_PROJECTOR
    path.parent.mkdir(parents=True, exist_ok=True)
    sd = tiny_uso_state_dict(seed)
    write_atomic(path, lambda tmp: save_file(sd, tmp, metadata={"format": "pt"}))
    return [path]
