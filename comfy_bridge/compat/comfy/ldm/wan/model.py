"""`comfy.ldm.wan.model`: Wan's sinusoidal position embedding (`optimized_attention` is exposed here as in
ComfyUI, for packs that swap it; this backend's Wan model does not read it)."""

from __future__ import annotations

import torch

from comfy_bridge.compat.comfy.ldm.modules.attention import optimized_attention

__all__ = [
    "sinusoidal_embedding_1d",
    "optimized_attention",
    "WanSelfAttention",
    "WanT2VCrossAttention",
    "WanI2VCrossAttention",
    "WanAttentionBlock",
    "WanModel",
]


def sinusoidal_embedding_1d(dim: int, position: torch.Tensor) -> torch.Tensor:
    """[N] positions -> [N, dim] float32: [cos, sin] of position * 10000^(-i / (dim / 2))."""
    assert dim % 2 == 0
    half = dim // 2
    position = position.type(torch.float32)
    angles = torch.outer(position, torch.pow(10000, -torch.arange(half).to(position).div(half)))
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=1)


from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel  # noqa: E402


class WanSelfAttention(UnsupportedModel):
    pass


class WanT2VCrossAttention(WanSelfAttention):
    pass


class WanI2VCrossAttention(WanSelfAttention):
    pass


class WanAttentionBlock(UnsupportedModel):
    pass


class WanModel(UnsupportedModel):
    pass
