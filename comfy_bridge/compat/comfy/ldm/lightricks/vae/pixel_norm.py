"""`comfy.ldm.lightricks.vae.pixel_norm`."""

from __future__ import annotations

import torch
from torch import nn


class PixelNorm(nn.Module):
    """x / sqrt(mean(x^2 over `dim`) + eps)."""

    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt(torch.mean(x**2, dim=self.dim, keepdim=True) + self.eps)
