"""`comfy.ldm.wan.vae`: Wan's VAE layers. RMS_norm and the causal convolution compute as ComfyUI's do; the
whole VAE classes are for subclassing and isinstance checks (the VAE runs on the executors)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel
from comfy_bridge.compat.comfy.ops import disable_weight_init

CACHE_T = 2


class CausalConv3d(disable_weight_init.Conv3d):
    """A Conv3d padded only on the past side of time; `cache_x` (earlier frames) stands in for that padding."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        t, h, w = self.padding
        self._padding = (w, w, h, h, 2 * t, 0)
        self.padding = (0, 0, 0)

    def forward(
        self,
        x: torch.Tensor,
        cache_x: torch.Tensor | None = None,
        cache_list: list | None = None,
        cache_idx: int | None = None,
    ) -> torch.Tensor:
        if cache_list is not None:
            cache_x, cache_list[cache_idx] = cache_list[cache_idx], None
        padding = list(self._padding)
        if cache_x is not None and self._padding[4] > 0:
            x = torch.cat([cache_x.to(x.device), x], dim=2)
            padding[4] -= cache_x.shape[2]
        return super().forward(F.pad(x, padding))


class RMS_norm(nn.Module):
    """L2-normalise over the channel dim, times sqrt(dim) and a learned gain (and bias)."""

    def __init__(self, dim: int, channel_first: bool = True, images: bool = True, bias: bool = False):
        super().__init__()
        shape = (dim, *((1, 1) if images else (1, 1, 1))) if channel_first else (dim,)
        self.channel_first, self.scale = channel_first, dim**0.5
        self.gamma = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.normalize(x, dim=1 if self.channel_first else -1) * self.scale * self.gamma.to(x)
        return out + self.bias.to(x) if self.bias is not None else out


class Resample(UnsupportedModel):
    pass


class ResidualBlock(UnsupportedModel):
    pass


class AttentionBlock(UnsupportedModel):
    pass


class Encoder3d(UnsupportedModel):
    pass


class Decoder3d(UnsupportedModel):
    pass


class WanVAE(UnsupportedModel):
    pass
