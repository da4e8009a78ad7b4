"""`comfy.ldm.modules.diffusionmodules.openaimodel`: the SD UNet's module names.

apply_control (adding a ControlNet residual popped from `control[name]`), Timestep and the re-exported
SpatialTransformer / timestep_embedding are real. UNetModel and its blocks (ResBlock, Upsample, Downsample,
VideoResBlock, TimestepEmbedSequential) exist for imports, subclassing and isinstance checks; building one raises
UnsupportedFeature (see comfy.ldm.model_classes). This backend's UNet does not call this module, so patching
its functions (e.g. `openaimodel.apply_control = f`) does not change how this backend runs a model.
"""
from __future__ import annotations

import logging
from abc import abstractmethod
from typing import Any

import torch
from torch import nn

from comfy_bridge.compat.comfy.ldm.model_classes import WHY, UnsupportedModel
from comfy_bridge.compat.comfy.ldm.modules.attention import SpatialTransformer
from comfy_bridge.compat.comfy.ldm.modules.diffusionmodules.util import timestep_embedding
from comfy_bridge.packs.origin import UnsupportedFeature

__all__ = ["TimestepBlock", "TimestepEmbedSequential", "Upsample", "Downsample", "ResBlock", "VideoResBlock",
           "Timestep", "apply_control", "UNetModel", "SpatialTransformer", "timestep_embedding",
           "forward_timestep_embed"]


class TimestepBlock(nn.Module):
    """A module whose forward takes the timestep embedding as its second argument."""

    @abstractmethod
    def forward(self, x, emb):
        """Apply the module to x given the timestep embedding emb."""


class TimestepEmbedSequential(UnsupportedModel, TimestepBlock):
    """The UNet's nn.Sequential that passes the timestep embedding (and context) to its blocks."""


class Upsample(UnsupportedModel):
    """The UNet's 2x upsampling block (optionally followed by a conv)."""


class Downsample(UnsupportedModel):
    """The UNet's 2x downsampling block (strided conv or average pooling)."""


class ResBlock(UnsupportedModel, TimestepBlock):
    """The UNet's residual block conditioned on the timestep embedding."""


class VideoResBlock(ResBlock):
    """SVD's ResBlock with a temporal residual stack."""


class UNetModel(UnsupportedModel):
    """The SD1/SD2/SDXL UNet."""


class Timestep(nn.Module):
    """Sinusoidal embedding of `dim` channels of the timesteps."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return timestep_embedding(t, self.dim)


def apply_control(h: torch.Tensor, control: dict | None, name: str) -> torch.Tensor:
    """h plus (in place) the last residual of control[name], which is popped; h unchanged without one."""
    if control is None or not control.get(name):
        return h
    residual = control[name].pop()
    if residual is not None:
        try:
            h += residual
        except RuntimeError:
            logging.warning("warning control could not be applied %s %s", h.shape, residual.shape)
    return h


def forward_timestep_embed(ts: Any, x: torch.Tensor, emb: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """Runs a UNet block's layers; the UNet's blocks cannot be built here (the UNet runs on the executors)."""
    raise UnsupportedFeature("comfy.ldm.modules.diffusionmodules.openaimodel.forward_timestep_embed", WHY)
