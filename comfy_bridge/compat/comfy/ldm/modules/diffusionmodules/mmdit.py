"""`comfy.ldm.modules.diffusionmodules.mmdit`: SD3's MMDiT names. RMSNorm is real; JointBlock (and the
model classes) exist for imports, subclassing and isinstance checks and raise UnsupportedFeature when built."""

from __future__ import annotations

import torch
from torch import nn

from comfy_bridge.compat.comfy.ldm.common_dit import rms_norm
from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel

__all__ = ["RMSNorm", "JointBlock", "MMDiT", "OpenAISignatureMMDITWrapper"]


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2 over the last dim) + eps), times a learnable weight when `elementwise_affine`
    (ComfyUI's argument order: dim, elementwise_affine, eps)."""

    def __init__(
        self, dim: int, elementwise_affine: bool = False, eps: float = 1e-6, device=None, dtype=None, **kwargs
    ):
        super().__init__()
        self.eps = eps
        self.learnable_scale = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.empty(dim, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


class JointBlock(UnsupportedModel):
    """An MMDiT block attending jointly over the image and text tokens."""


class MMDiT(UnsupportedModel):
    """SD3's multimodal diffusion transformer."""


class OpenAISignatureMMDITWrapper(MMDiT):
    """MMDiT called with the UNet's signature (x, timesteps, context, y)."""
