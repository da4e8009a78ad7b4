"""`comfy.ldm.qwen_image.model`: Qwen-Image's rotary embedding application."""

from __future__ import annotations

import torch

__all__ = ["apply_rotary_emb"]


def apply_rotary_emb(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """Rotate each consecutive channel pair (a, b) of x to freqs_cis[..., 0] * a + freqs_cis[..., 1] * b
    (freqs_cis: [..., dim/2, 2, 2] rotation matrices as comfy.ldm.flux.math.rope makes); x unchanged when it
    has no tokens (x.shape[1] == 0). The result has x's shape and the promoted dtype."""
    if x.shape[1] == 0:
        return x
    pairs = x.reshape(*x.shape[:-1], -1, 1, 2)
    return (freqs_cis[..., 0] * pairs[..., 0] + freqs_cis[..., 1] * pairs[..., 1]).reshape(*x.shape)
