"""`comfy.ldm.modules.diffusionmodules.model`: the SD VAE's building blocks. `Normalize` and `nonlinearity`
compute as ComfyUI's; the blocks are for subclassing and isinstance checks (VAEs run on the executors)."""

from __future__ import annotations

import torch
from torch import nn

from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel
from comfy_bridge.compat.comfy.ops import disable_weight_init


def nonlinearity(x: torch.Tensor) -> torch.Tensor:
    """swish: x * sigmoid(x)."""
    return x * torch.sigmoid(x)


def Normalize(in_channels: int, num_groups: int = 32) -> nn.Module:
    return disable_weight_init.GroupNorm(num_groups=num_groups, num_channels=in_channels, eps=1e-6, affine=True)


class Upsample(UnsupportedModel):
    pass


class Downsample(UnsupportedModel):
    pass


class ResnetBlock(UnsupportedModel):
    pass


class AttnBlock(UnsupportedModel):
    pass


class Encoder(UnsupportedModel):
    pass


class Decoder(UnsupportedModel):
    pass
