"""`comfy.ldm.flux.layers`: Flux's building blocks. The embeddings and norms (timestep_embedding, EmbedND,
MLPEmbedder, RMSNorm, QKNorm, Modulation, apply_mod) are real; DoubleStreamBlock, SingleStreamBlock,
SelfAttention and LastLayer exist for imports, subclassing and isinstance checks and raise UnsupportedFeature
when built (see comfy.ldm.model_classes)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from comfy_bridge.compat.comfy.ldm.common_dit import rms_norm
from comfy_bridge.compat.comfy.ldm.flux.math import attention, rope
from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel

__all__ = [
    "EmbedND",
    "timestep_embedding",
    "MLPEmbedder",
    "RMSNorm",
    "QKNorm",
    "SelfAttention",
    "ModulationOut",
    "Modulation",
    "apply_mod",
    "DoubleStreamBlock",
    "SingleStreamBlock",
    "LastLayer",
    "attention",
    "rope",
]


class EmbedND(nn.Module):
    """Rope matrices of each position axis (ids[..., i] with axes_dim[i] channels), concatenated: [B, 1, N, D/2, 2, 2]."""

    def __init__(self, dim: int, theta: int, axes_dim: list):
        super().__init__()
        self.dim = dim
        self.theta = theta
        self.axes_dim = axes_dim

    def forward(self, ids: Tensor) -> Tensor:
        parts = [rope(ids[..., i], self.axes_dim[i], self.theta) for i in range(ids.shape[-1])]
        return torch.cat(parts, dim=-3).unsqueeze(1)


def timestep_embedding(t: Tensor, dim: int, max_period: float = 10000, time_factor: float = 1000.0) -> Tensor:
    """Flux's sinusoidal embedding of time_factor * t: [cos, sin] of the scaled t times max_period^(-i / half),
    zero-padded for odd dim; in t's dtype when t is floating point."""
    t = time_factor * t
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) / half * torch.arange(half, dtype=torch.float32, device=t.device))
    angles = t[:, None].float() * freqs[None]
    emb = torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)
    if dim % 2:
        emb = torch.nn.functional.pad(emb, (0, 1))
    if torch.is_floating_point(t):
        emb = emb.to(t)
    return emb


class MLPEmbedder(nn.Module):
    def __init__(self, in_dim: int, hidden_dim: int, dtype=None, device=None, operations=None):
        super().__init__()
        ops = operations or nn
        self.in_layer = ops.Linear(in_dim, hidden_dim, bias=True, dtype=dtype, device=device)
        self.silu = nn.SiLU()
        self.out_layer = ops.Linear(hidden_dim, hidden_dim, bias=True, dtype=dtype, device=device)

    def forward(self, x: Tensor) -> Tensor:
        return self.out_layer(self.silu(self.in_layer(x)))


class RMSNorm(nn.Module):
    """RMS norm (eps 1e-6) times the learnable `scale`."""

    def __init__(self, dim: int, dtype=None, device=None, operations=None):
        super().__init__()
        self.scale = nn.Parameter(torch.empty(dim, dtype=dtype, device=device))

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(x, self.scale, 1e-6)


class QKNorm(nn.Module):
    def __init__(self, dim: int, dtype=None, device=None, operations=None):
        super().__init__()
        self.query_norm = RMSNorm(dim, dtype=dtype, device=device, operations=operations)
        self.key_norm = RMSNorm(dim, dtype=dtype, device=device, operations=operations)

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> tuple:
        return self.query_norm(q).to(v), self.key_norm(k).to(v)


@dataclass
class ModulationOut:
    shift: Tensor
    scale: Tensor
    gate: Tensor


class Modulation(nn.Module):
    """SiLU -> Linear(dim, 3 or 6 * dim) split into one or two (shift, scale, gate) triples."""

    def __init__(self, dim: int, double: bool, dtype=None, device=None, operations=None):
        super().__init__()
        self.is_double = double
        self.multiplier = 6 if double else 3
        self.lin = (operations or nn).Linear(dim, self.multiplier * dim, bias=True, dtype=dtype, device=device)

    def forward(self, vec: Tensor) -> tuple:
        if vec.ndim == 2:
            vec = vec[:, None, :]
        out = self.lin(nn.functional.silu(vec)).chunk(self.multiplier, dim=-1)
        return ModulationOut(*out[:3]), (ModulationOut(*out[3:]) if self.is_double else None)


def apply_mod(
    tensor: Tensor, m_mult: Tensor, m_add: Tensor | None = None, modulation_dims: list | None = None
) -> Tensor:
    """tensor * m_mult (+ m_add); with modulation_dims [(start, end, index), ...] only those token ranges, in
    place, with the modulation row `index`."""
    if modulation_dims is None:
        return tensor * m_mult if m_add is None else torch.addcmul(m_add, tensor, m_mult)
    for start, end, index in modulation_dims:
        tensor[:, start:end] *= m_mult[:, index]
        if m_add is not None:
            tensor[:, start:end] += m_add[:, index]
    return tensor


class SelfAttention(UnsupportedModel):
    """Flux's attention projection (qkv, QK norm, output projection)."""


class DoubleStreamBlock(UnsupportedModel):
    """Flux's block with separate image and text streams joined in attention."""


class SingleStreamBlock(UnsupportedModel):
    """Flux's block over the concatenated image and text tokens."""


class LastLayer(UnsupportedModel):
    """Flux's final norm, modulation and projection to patches."""
