"""A tiny Lotus-D depth model (lotus-depth-d-v1-1) in its published layout: a bare UNet2DConditionModel state dict
in diffusers' names (the layout ComfyUI's model_detection reads Lotus from), an SD2 UNet's block structure (four
levels, two resnets each, attention on the first three, linear projections, 1024-wide context) with the 4-wide
class embedding of Lotus' task switch, at tiny widths. Its VAE is SD's (sd1-tiny-vae stands in)."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import UNet2DConditionModel

from .demo import SEED, save_tiny
from .detect import LOTUS_ADM_WIDTH
from .sd2_demo import sd2_unet

FILE = "lotus-depth-d-v1-1_tiny.safetensors"
CONTEXT = 1024  # LotusConditioning's embedding width (SD2's text encoder)


def lotus_unet() -> UNet2DConditionModel:
    return sd2_unet(
        "lotus",
        (32, 32, 64, 64),
        CONTEXT,
        class_embed_type="projection",
        projection_class_embeddings_input_dim=LOTUS_ADM_WIDTH,
    )


def lotus_tensors() -> dict[str, torch.Tensor]:
    """The tiny file's tensors (seeded)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED + 60)
        return lotus_unet().state_dict()


def build_demo_lotus(models_dir: Path) -> list[Path]:
    """diffusion_models/lotus-depth-d-v1-1_tiny.safetensors."""
    return [save_tiny(lotus_tensors(), Path(models_dir) / "diffusion_models" / FILE)]
