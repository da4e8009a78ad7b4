"""`comfy.ldm.flux.model`: FluxParams and the Flux model class name (building a Flux raises UnsupportedFeature,
see comfy.ldm.model_classes)."""

from __future__ import annotations

from dataclasses import dataclass

from comfy_bridge.compat.comfy.ldm.flux.layers import (
    DoubleStreamBlock,
    EmbedND,
    LastLayer,
    MLPEmbedder,
    SingleStreamBlock,
    timestep_embedding,
)
from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel

__all__ = [
    "FluxParams",
    "Flux",
    "DoubleStreamBlock",
    "EmbedND",
    "LastLayer",
    "MLPEmbedder",
    "SingleStreamBlock",
    "timestep_embedding",
]


@dataclass
class FluxParams:
    in_channels: int
    out_channels: int
    vec_in_dim: int
    context_in_dim: int
    hidden_size: int
    mlp_ratio: float
    num_heads: int
    depth: int
    depth_single_blocks: int
    axes_dim: list
    theta: int
    patch_size: int
    qkv_bias: bool
    guidance_embed: bool


class Flux(UnsupportedModel):
    """Flux's diffusion transformer."""
