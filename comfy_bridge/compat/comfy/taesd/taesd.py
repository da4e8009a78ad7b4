"""`comfy.taesd.taesd`: the Tiny AutoEncoder's layers, which compute as ComfyUI's (packs build their own
TAESD-style decoders from them); the TAESD wrapper class runs on the executors (latent previews)."""

from __future__ import annotations

import torch
from torch import nn

from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel
from comfy_bridge.compat.comfy.ops import disable_weight_init


def conv(n_in: int, n_out: int, **kwargs) -> nn.Module:
    """3x3 convolution, padding 1."""
    return disable_weight_init.Conv2d(n_in, n_out, 3, padding=1, **kwargs)


class Clamp(nn.Module):
    """Soft clamp to (-3, 3): tanh(x / 3) * 3."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x / 3) * 3


class Block(nn.Module):
    """Three 3x3 convs (ReLU between) plus a 1x1 skip when the width changes, then ReLU."""

    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.conv = nn.Sequential(conv(n_in, n_out), nn.ReLU(), conv(n_out, n_out), nn.ReLU(), conv(n_out, n_out))
        self.skip = disable_weight_init.Conv2d(n_in, n_out, 1, bias=False) if n_in != n_out else nn.Identity()
        self.fuse = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fuse(self.conv(x) + self.skip(x))


def Encoder(latent_channels: int = 4) -> nn.Sequential:
    """Image -> latent: a conv, then three stride-2 stages of three Blocks each, and a conv to the latent."""
    layers: list[nn.Module] = [conv(3, 64), Block(64, 64)]
    for _ in range(3):
        layers += [conv(64, 64, stride=2, bias=False), Block(64, 64), Block(64, 64), Block(64, 64)]
    return nn.Sequential(*layers, conv(64, latent_channels))


def Decoder(latent_channels: int = 4) -> nn.Sequential:
    """Latent -> image: soft clamp, a conv, three 2x-upsampling stages of three Blocks, then to RGB."""
    layers: list[nn.Module] = [Clamp(), conv(latent_channels, 64), nn.ReLU()]
    for _ in range(3):
        layers += [Block(64, 64), Block(64, 64), Block(64, 64), nn.Upsample(scale_factor=2), conv(64, 64, bias=False)]
    return nn.Sequential(*layers, Block(64, 64), conv(64, 3))


class TAESD(UnsupportedModel):
    pass
