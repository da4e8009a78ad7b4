"""Tiny Flux Redux files for flux-tiny (nodes.models.flux_demo), for `demo-models`:

- clip_vision/sigclip-vision-tiny.safetensors: a SigLIP image tower in the layout of
  sigclip_vision_patch14_384.safetensors (nodes/models/siglip_vision.py says where the layout comes from):
  SigLIP so400m's 27 layers, patch 14 at 384 pixels (27 x 27 = 729 tokens) and 16 heads, but 32 wide
  (1152 there) with a 64-wide MLP (4304), float16 like the published file;
- style_models/flux1-redux-dev-tiny.safetensors: Redux's two layers (redux_up, redux_down) from that
  32-wide tower to flux-tiny's 32-wide T5 tokens (1152 -> 12288 -> 4096 in flux1-redux-dev).

Same seed -> byte-identical files."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from nodes.models.flux_demo import randomize_constants
from nodes.models.siglip_vision import PREFIX, SiglipVisionSizes, SiglipVisionTower
from nodes.models.style_model import ReduxEncoder
from nodes.output_claims import write_atomic

SEED = 23
SIGLIP = "clip_vision/sigclip-vision-tiny.safetensors"
REDUX = "style_models/flux1-redux-dev-tiny.safetensors"
SIGLIP_SIZES = SiglipVisionSizes(width=32, mlp=64, layers=27, patch=14, side=27, image_size=384)
TEXT_WIDTH = 32  # flux-tiny's T5 width


def tiny_siglip_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        tower = SiglipVisionTower(SIGLIP_SIZES)
        randomize_constants(tower, torch.Generator().manual_seed(seed))  # norm scales of one would hide mix-ups
        with torch.no_grad():  # nn.Embedding's unit normal would drown the 384-pixel patches
            tower.embeddings.position_embedding.weight.mul_(0.1)
    return {PREFIX + k: v.to(torch.float16).contiguous() for k, v in tower.state_dict().items()}


def tiny_redux_state_dict(seed: int = SEED) -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        redux = ReduxEncoder(SIGLIP_SIZES.width, TEXT_WIDTH)
    return {k: v.contiguous() for k, v in redux.state_dict().items()}


def build_demo_redux(models_dir: Path, seed: int = SEED) -> list[Path]:
    """Write the tiny SigLIP tower and Redux model under a ComfyUI models folder; returns the paths written."""
    written = []
    for rel, sd in ((SIGLIP, tiny_siglip_state_dict(seed)), (REDUX, tiny_redux_state_dict(seed))):
        path = Path(models_dir) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp, sd=sd: save_file(sd, tmp, metadata={"format": "pt"}))
        written.append(path)
    return written
