"""`comfy.ldm.flux.math`: Flux's rotary position embedding and its attention entry point.

rope(pos, dim, theta) gives [B, N, dim/2, 2, 2] rotation matrices (float32); apply_rope rotates the channel
pairs of q and k ([B, heads, N, dim]) by them; attention(q, k, v, pe) applies the rope (when pe is given) and
runs `optimized_attention` on the [B, heads, N, dim] tensors, returning [B, N, heads * dim]. The module-level
`optimized_attention` is looked up at call time, so a pack may replace it here.
"""

from __future__ import annotations

import torch
from torch import Tensor

from comfy_bridge.compat.comfy.ldm.modules.attention import optimized_attention

__all__ = ["attention", "rope", "apply_rope", "apply_rope1", "optimized_attention"]


def rotate(x: Tensor, pe: Tensor) -> Tensor:
    """Each consecutive channel pair (a, b) of x -> pe[..., 0] * a + pe[..., 1] * b, in pe's dtype."""
    pairs = x.to(dtype=pe.dtype).reshape(*x.shape[:-1], -1, 1, 2)
    return (pe[..., 0] * pairs[..., 0] + pe[..., 1] * pairs[..., 1]).reshape(*x.shape)


def attention(
    q: Tensor, k: Tensor, v: Tensor, pe: Tensor | None, mask: Tensor | None = None, transformer_options: dict = {}
) -> Tensor:
    if pe is not None:
        q, k = rotate(q, pe).type_as(v), rotate(k, pe).type_as(v)
    return optimized_attention(
        q, k, v, q.shape[1], skip_reshape=True, mask=mask, transformer_options=transformer_options
    )


def rope(pos: Tensor, dim: int, theta: float) -> Tensor:
    """Rotation matrices [[cos, -sin], [sin, cos]] of angle pos * theta^(-2i/dim) for i < dim/2."""
    assert dim % 2 == 0
    exponents = torch.linspace(0, (dim - 2) / dim, steps=dim // 2, dtype=torch.float64, device=pos.device)
    omega = 1.0 / (theta**exponents)
    angles = pos.to(dtype=torch.float32).unsqueeze(-1) * omega
    cos, sin = torch.cos(angles), torch.sin(angles)
    out = torch.stack([cos, -sin, sin, cos], dim=-1)
    return out.reshape(*out.shape[:-1], 2, 2).to(dtype=torch.float32)


def apply_rope1(x: Tensor, freqs_cis: Tensor) -> Tensor:
    return rotate(x, freqs_cis).type_as(x)


def apply_rope(xq: Tensor, xk: Tensor, freqs_cis: Tensor) -> tuple[Tensor, Tensor]:
    return apply_rope1(xq, freqs_cis), apply_rope1(xk, freqs_cis)
