"""LTX-2's latent upsampler (ltx-2-spatial-upscaler-x2-1.0 / ltx-2.3-spatial-upscaler-x2-1.x.safetensors in
models/latent_upscale_models) as published by Lightricks and read by ComfyUI 0.10.0's LatentUpscaleModelLoader
(comfy_extras/nodes_hunyuan.py: a file with `post_upsample_res_blocks.0.conv2.bias` is an LTX latent upsampler,
built from the JSON in its safetensors metadata "config" with comfy/ldm/lightricks/latent_upsampler.py's
from_config defaults).

Key layout (bare, no prefix): `initial_conv.*`, `initial_norm.*`, `res_blocks.{i}.{conv1,norm1,conv2,norm2}.*`,
the upsampler (`upsampler.0.*`: a 2D convolution before a pixel shuffle; or with the rational resampler
`upsampler.conv.*` and the blur kernel buffer `upsampler.blur_down.kernel`), `post_upsample_res_blocks.{i}.*`,
`final_conv.*`. The published configs (the files' headers as LTX-2 ports record them, e.g. the LTX2 Swift port's
test of "the published configuration"): in/out 128 channels, 1024 wide, 4 blocks per stage, 3D convolutions,
spatial x2. The network is diffusers' LTX2LatentUpsamplerModel, whose module names are those keys."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import torch
from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel

from nodes.models.errors import ModelLoadError
from nodes.models.safetensors_io import build_module

MARKER = "post_upsample_res_blocks.0.conv2.bias"  # ComfyUI's test for an LTX latent upsampler
# ComfyUI's LatentUpsampler.from_config defaults, for a config that leaves a setting out.
DEFAULTS = {
    "in_channels": 4,
    "mid_channels": 128,
    "num_blocks_per_stage": 4,
    "dims": 2,
    "spatial_upsample": True,
    "temporal_upsample": False,
    "spatial_scale": 2.0,
    "rational_resampler": False,
}
RATIONAL_SCALES = (0.75, 1.5, 2.0, 4.0)


def is_latent_upsampler(keys: Mapping[str, Any]) -> bool:
    return MARKER in keys


def diffusers_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """LTX2LatentUpsamplerModel's arguments for a file's "config" JSON (ComfyUI's names and defaults)."""
    c = {**DEFAULTS, **{k: config[k] for k in DEFAULTS if k in config}}
    if not (c["spatial_upsample"] or c["temporal_upsample"]):
        raise ValueError("neither spatial_upsample nor temporal_upsample is set")
    if c["dims"] not in (2, 3):
        raise ValueError(f"dims must be 2 or 3, got {c['dims']!r}")
    if c["rational_resampler"] and float(c["spatial_scale"]) not in RATIONAL_SCALES:
        raise ValueError(f"spatial_scale {c['spatial_scale']!r} is not one of {list(RATIONAL_SCALES)}")
    return {
        "in_channels": int(c["in_channels"]),
        "mid_channels": int(c["mid_channels"]),
        "num_blocks_per_stage": int(c["num_blocks_per_stage"]),
        "dims": int(c["dims"]),
        "spatial_upsample": bool(c["spatial_upsample"]),
        "temporal_upsample": bool(c["temporal_upsample"]),
        "rational_spatial_scale": float(c["spatial_scale"]),
        "use_rational_resampler": bool(c["rational_resampler"]),
    }


class LatentUpsampler(torch.nn.Module):
    """The upsampler network on latents in the VAE's raw (un-normalised) space, float32 compute."""

    def __init__(self, module: LTX2LatentUpsamplerModel) -> None:
        super().__init__()
        self.module = module

    def forward(self, latent: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
        """A normalised LTX video latent [B,C,F,H,W] -> the upsampled one, normalised with the same per-channel
        statistics (LTXVLatentUpsampler: un-normalise, upsample, normalise)."""
        channels = self.module.config.in_channels
        if latent.dim() != 5 or latent.shape[1] != channels:
            raise ValueError(
                f"the latent upsampler takes video latents [batch, {channels}, frames, height, width], "
                f"got {tuple(latent.shape)}"
            )
        if mean.numel() != channels or std.numel() != channels:
            raise ValueError(f"the VAE's latent statistics have {mean.numel()} channels, the upsampler {channels}")
        view = (1, -1, 1, 1, 1)
        x = latent.float() * std.float().view(view) + mean.float().view(view)
        y = self.module(x)
        return ((y - mean.float().view(view)) / std.float().view(view)).to(latent.dtype)


def load_latent_upsampler(
    state_dict: Mapping[str, torch.Tensor], metadata: Mapping[str, str], path: str
) -> LatentUpsampler:
    """The upsampler of a published latent upscale model file (its tensors and safetensors metadata)."""
    if not is_latent_upsampler(state_dict):
        raise ModelLoadError(path, f"not an LTX latent upsampler (no {MARKER})")
    try:
        config = json.loads(metadata["config"])
        kwargs = diffusers_config(config)
    except KeyError:
        raise ModelLoadError(path, "its metadata has no 'config' (the upsampler's sizes)") from None
    except (TypeError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable LTX latent upsampler config: {e}") from None
    module = build_module(lambda: LTX2LatentUpsamplerModel(**kwargs), dict(state_dict), path, "LTX latent upsampler")
    return LatentUpsampler(module)
