"""`comfy.ldm.modules.diffusionmodules.openaimodel`: the SD UNet's module names.

The UNet's building blocks are real modules with ComfyUI's parameter names and forward signatures
(ResBlock, Upsample, Downsample, TimestepEmbedSequential, forward_timestep_embed), as are apply_control
(adding a ControlNet residual popped from `control[name]`), Timestep and the re-exported SpatialTransformer /
timestep_embedding: packs build ControlNet-like side networks from them. UNetModel and VideoResBlock exist for
imports, subclassing and isinstance checks; building one raises UnsupportedFeature (see
comfy.ldm.model_classes). This backend's UNet does not call this module, so patching
its functions (e.g. `openaimodel.apply_control = f`) does not change how this backend runs a model.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from comfy_bridge.compat.comfy import ops as comfy_ops
from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel
from comfy_bridge.compat.comfy.ldm.modules.attention import (
    SpatialTransformer,
    SpatialVideoTransformer,
)
from comfy_bridge.compat.comfy.ldm.modules.diffusionmodules.util import (
    avg_pool_nd,
    timestep_embedding,
)

ops = comfy_ops.disable_weight_init

__all__ = [
    "TimestepBlock",
    "TimestepEmbedSequential",
    "Upsample",
    "Downsample",
    "ResBlock",
    "VideoResBlock",
    "Timestep",
    "apply_control",
    "UNetModel",
    "SpatialTransformer",
    "timestep_embedding",
    "forward_timestep_embed",
]


class TimestepBlock(nn.Module):
    """A module whose forward takes the timestep embedding as its second argument."""

    @abstractmethod
    def forward(self, x, emb):
        """Apply the module to x given the timestep embedding emb."""


def forward_timestep_embed(
    ts: Any,
    x: torch.Tensor,
    emb: torch.Tensor,
    context: Any = None,
    transformer_options: dict | None = None,
    output_shape: Any = None,
    time_context: Any = None,
    num_video_frames: Any = None,
    image_only_indicator: Any = None,
) -> torch.Tensor:
    """Run the layers of a UNet block in order, each with the inputs its kind takes: timestep blocks get the
    embedding (video ones also the frame count), transformers the context and transformer_options (whose
    "transformer_index" counts them), Upsample the skip connection's shape; any other layer is called on x
    alone unless a transformer_options["patches"]["forward_timestep_embed_patch"] entry claims its class."""
    options = {} if transformer_options is None else transformer_options
    for layer in ts:
        if isinstance(layer, VideoResBlock):
            x = layer(x, emb, num_video_frames, image_only_indicator)
        elif isinstance(layer, TimestepBlock):
            x = layer(x, emb)
        elif isinstance(layer, (SpatialVideoTransformer, SpatialTransformer)):
            if isinstance(layer, SpatialVideoTransformer):
                x = layer(x, context, time_context, num_video_frames, image_only_indicator, options)
            else:
                x = layer(x, context, options)
            if "transformer_index" in options:
                options["transformer_index"] += 1
        elif isinstance(layer, Upsample):
            x = layer(x, output_shape=output_shape)
        else:
            handler = next(
                (
                    h
                    for cls, h in options.get("patches", {}).get("forward_timestep_embed_patch", ())
                    if isinstance(layer, cls)
                ),
                None,
            )
            if handler is None:
                x = layer(x)
            else:
                x = handler(
                    layer, x, emb, context, options, output_shape, time_context, num_video_frames, image_only_indicator
                )
    return x


class TimestepEmbedSequential(nn.Sequential, TimestepBlock):
    """The UNet's nn.Sequential that passes the timestep embedding (and context) to the layers that take them."""

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return forward_timestep_embed(self, *args, **kwargs)


class Upsample(nn.Module):
    """Nearest-neighbour 2x upsampling (of the last two axes; for dims=3 the frame axis is kept), then a 3x3
    conv when `use_conv`. `output_shape` (the skip connection's shape) overrides the target size."""

    def __init__(
        self,
        channels: int,
        use_conv: bool,
        dims: int = 2,
        out_channels: int | None = None,
        padding: int = 1,
        dtype: Any = None,
        device: Any = None,
        operations: Any = ops,
    ):
        super().__init__()
        self.channels, self.out_channels = channels, out_channels or channels
        self.use_conv, self.dims = use_conv, dims
        if use_conv:
            self.conv = operations.conv_nd(
                dims, channels, self.out_channels, 3, padding=padding, dtype=dtype, device=device
            )

    def forward(self, x: torch.Tensor, output_shape: Any = None) -> torch.Tensor:
        assert x.shape[1] == self.channels
        size = [s * 2 for s in x.shape[-2:]]
        if output_shape is not None:
            size = list(output_shape[-2:])
        if self.dims == 3:
            size = [x.shape[2], *size]
        x = F.interpolate(x, size=size, mode="nearest")
        return self.conv(x) if self.use_conv else x


class Downsample(nn.Module):
    """2x downsampling of the last two axes: a strided 3x3 conv when `use_conv` (parameters under `op`), else
    average pooling (channel count kept)."""

    def __init__(
        self,
        channels: int,
        use_conv: bool,
        dims: int = 2,
        out_channels: int | None = None,
        padding: int = 1,
        dtype: Any = None,
        device: Any = None,
        operations: Any = ops,
    ):
        super().__init__()
        self.channels, self.out_channels = channels, out_channels or channels
        self.use_conv, self.dims = use_conv, dims
        stride = (1, 2, 2) if dims == 3 else 2
        if use_conv:
            self.op = operations.conv_nd(
                dims, channels, self.out_channels, 3, stride=stride, padding=padding, dtype=dtype, device=device
            )
        else:
            if self.channels != self.out_channels:
                raise ValueError("Downsample without a conv keeps the channel count")
            self.op = avg_pool_nd(dims, kernel_size=stride, stride=stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.shape[1] == self.channels
        return self.op(x)


class ResBlock(TimestepBlock):
    """The UNet's residual block: GroupNorm-SiLU-conv (`in_layers`), plus the projected timestep embedding
    (`emb_layers`; as scale and shift of the second norm with `use_scale_shift_norm`), then
    GroupNorm-SiLU-dropout-conv (`out_layers`), added to the (projected) input (`skip_connection`). `up` /
    `down` resample both paths between the first norm and conv. Parameter names are ComfyUI's."""

    def __init__(
        self,
        channels: int,
        emb_channels: int,
        dropout: float,
        out_channels: int | None = None,
        use_conv: bool = False,
        use_scale_shift_norm: bool = False,
        dims: int = 2,
        use_checkpoint: bool = False,
        up: bool = False,
        down: bool = False,
        kernel_size: Any = 3,
        exchange_temb_dims: bool = False,
        skip_t_emb: bool = False,
        dtype: Any = None,
        device: Any = None,
        operations: Any = ops,
    ):
        super().__init__()
        out = out_channels or channels
        self.channels, self.emb_channels, self.dropout, self.out_channels = channels, emb_channels, dropout, out
        self.use_conv, self.use_checkpoint, self.use_scale_shift_norm = use_conv, use_checkpoint, use_scale_shift_norm
        self.skip_t_emb = skip_t_emb
        self.exchange_temb_dims = exchange_temb_dims and not skip_t_emb
        padding = [k // 2 for k in kernel_size] if isinstance(kernel_size, list) else kernel_size // 2
        factory = {"dtype": dtype, "device": device}
        self.in_layers = nn.Sequential(
            operations.GroupNorm(32, channels, **factory),
            nn.SiLU(),
            operations.conv_nd(dims, channels, out, kernel_size, padding=padding, **factory),
        )
        self.updown = up or down
        resample = Upsample if up else Downsample if down else None
        if resample is None:
            self.h_upd = self.x_upd = nn.Identity()
        else:
            self.h_upd = resample(channels, False, dims, **factory)
            self.x_upd = resample(channels, False, dims, **factory)
        self.emb_layers = (
            None
            if skip_t_emb
            else nn.Sequential(
                nn.SiLU(), operations.Linear(emb_channels, 2 * out if use_scale_shift_norm else out, **factory)
            )
        )
        self.out_layers = nn.Sequential(
            operations.GroupNorm(32, out, **factory),
            nn.SiLU(),
            nn.Dropout(p=dropout),
            operations.conv_nd(dims, out, out, kernel_size, padding=padding, **factory),
        )
        if out == channels:
            self.skip_connection = nn.Identity()
        else:
            size, pad = (kernel_size, padding) if use_conv else (1, 0)
            self.skip_connection = operations.conv_nd(dims, channels, out, size, padding=pad, **factory)

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        if self.updown:
            h = self.in_layers[:-1](x)
            h, x = self.h_upd(h), self.x_upd(x)
            h = self.in_layers[-1](h)
        else:
            h = self.in_layers(x)
        emb_out = None
        if self.emb_layers is not None:
            emb_out = self.emb_layers(emb).type(h.dtype)
            emb_out = emb_out.reshape(*emb_out.shape, *([1] * (h.dim() - emb_out.dim())))
        if self.use_scale_shift_norm:
            h = self.out_layers[0](h)
            if emb_out is not None:
                scale, shift = emb_out.chunk(2, dim=1)
                h = h * (1 + scale) + shift
            h = self.out_layers[1:](h)
        else:
            if emb_out is not None:
                h = h + (emb_out.movedim(1, 2) if self.exchange_temb_dims else emb_out)
            h = self.out_layers(h)
        return self.skip_connection(x) + h


class VideoResBlock(UnsupportedModel, ResBlock):
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
