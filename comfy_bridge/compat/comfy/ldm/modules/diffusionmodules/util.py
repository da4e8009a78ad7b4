"""`comfy.ldm.modules.diffusionmodules.util`: the sinusoidal timestep embedding and small module helpers."""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["timestep_embedding", "zero_module", "scale_module", "mean_flat", "avg_pool_nd"]


def timestep_embedding(
    timesteps: torch.Tensor, dim: int, max_period: float = 10000, repeat_only: bool = False
) -> torch.Tensor:
    """[N] timesteps (may be fractional) -> [N, dim] float32: cos of t * f_i then sin of t * f_i, with
    f_i = max_period^(-i / (dim // 2)), zero-padded when dim is odd; `repeat_only` repeats t dim times."""
    if repeat_only:
        return timesteps[:, None].repeat(1, dim)
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) / half * torch.arange(half, dtype=torch.float32, device=timesteps.device))
    angles = timesteps[:, None].float() * freqs[None]
    emb = torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)
    if dim % 2:
        emb = torch.nn.functional.pad(emb, (0, 1))
    return emb


def zero_module(module: nn.Module) -> nn.Module:
    for p in module.parameters():
        p.detach().zero_()
    return module


def scale_module(module: nn.Module, scale: float) -> nn.Module:
    for p in module.parameters():
        p.detach().mul_(scale)
    return module


def mean_flat(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.mean(dim=list(range(1, tensor.ndim)))


def avg_pool_nd(dims: int, *args, **kwargs) -> nn.Module:
    pools = {1: nn.AvgPool1d, 2: nn.AvgPool2d, 3: nn.AvgPool3d}
    if dims not in pools:
        raise ValueError(f"unsupported dimensions: {dims}")
    return pools[dims](*args, **kwargs)
