"""Qwen-Image 2.1's VAE (vae/qwen_image_2.1_vae*.safetensors): an image VAE with 64 latent channels at 1/16 of
the size and RGBA pixels, saved in the Wan 2.2 VAE's key layout (`decoder.upsamples.N.upsamples.M.residual.*`,
`encoder.conv1`, `encoder.head.2`, `conv1`/`conv2` for the quant convs) with 3-D convolutions whose temporal
kernel is 1. The newest ComfyUI source (comfy/sd.py) tells it from the Wan 2.2 VAE by exactly that: the Wan 2.2
layout with a `decoder.head.2` kernel one frame deep; it builds it as Wan 2.2's VAE without pixel patches
(dims x[1, 2, 4, 8, 8], 64 channels, widths from `encoder.conv1` and `decoder.head.0`, pixel channels from
`decoder.head.2`), decodes image latents [B,64,h,w] to 4-channel images and pads RGB input with an opaque alpha
(1.0). It runs here as diffusers' AutoencoderKLQwenImage21 (the same network with 2-D convolutions): the names
map as for the Wan 2.2 VAE and each one-frame kernel drops its frame axis. The per-channel latent statistics are
the model's latent format (QWEN_IMAGE21_LATENT), not the VAE's, as in ComfyUI."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from diffusers import AutoencoderKLQwenImage21

from cluster.refs import ModelRef
from nodes.models.components import VAEModel
from nodes.models.detect import QWEN_IMAGE21_VAE_HEAD as HEAD
from nodes.models.detect import WAN22_VAE_MARKER, WAN_VAE_MARKER, is_qwen_image21_vae
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.safetensors_io import build_module
from nodes.models.vae import crop_to_multiple
from nodes.models.wan22_vae import RES_BLOCKS, diffusers_name

DOWNSCALE = 16
# The released structure, which ComfyUI fixes (the tiny demo keeps it): width multipliers and where time is
# downsampled (never used on one frame, but it decides which blocks carry a time_conv).
DIM_MULT = [1, 2, 4, 8, 8]
TIME_DOWN = [False, True, True, True]
ALPHA = 1.0  # the channel ComfyUI pads RGB input with (opaque)


def to_diffusers(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Wan 2.2-layout tensors -> AutoencoderKLQwenImage21's: Wan 2.2's names, one-frame kernels made 2-D."""
    out = {}
    for key, value in sd.items():
        if value.dim() == 5:
            if value.shape[2] != 1:
                raise ValueError(f"{key} has a {value.shape[2]}-frame kernel; Qwen-Image 2.1's are one frame deep")
            value = value[:, :, 0]
        out[diffusers_name(key)] = value
    return out


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, object]:
    """AutoencoderKLQwenImage21's config from the Wan-layout shapes (as ComfyUI reads them)."""
    return {
        "base_dim": int(sd["encoder.conv1.weight"].shape[0]),
        "decoder_base_dim": int(sd["decoder.head.0.gamma"].shape[0]),
        "z_dim": int(sd["conv2.weight"].shape[0]),
        "in_channels": int(sd["encoder.conv1.weight"].shape[1]),
        "out_channels": int(sd[HEAD].shape[0]),
        "is_residual": True,
        "patch_size": None,
        "dim_mult": DIM_MULT,
        "num_res_blocks": RES_BLOCKS,
        "temperal_downsample": TIME_DOWN,
        "scale_factor_spatial": DOWNSCALE,
    }


class QwenImage21VAE(VAEModel):
    """ComfyUI's conventions for this VAE: images in and out (no frame axis), pixels 0..1 <-> -1..1, input
    channels cut or padded with opaque alpha to the VAE's pixel channels, outputs clamped to 0..1 (RGBA)."""

    @property
    def pixel_channels(self) -> int:
        return int(self.module.config.out_channels)

    @torch.no_grad()
    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        pixels = crop_to_multiple(pixels, self.downscale)
        c = self.pixel_channels
        if pixels.shape[-1] > c:
            pixels = pixels[..., :c]
        elif pixels.shape[-1] < c:
            pixels = torch.nn.functional.pad(pixels, (0, c - pixels.shape[-1]), value=ALPHA)
        x = pixels.movedim(-1, 1).to(self.module.dtype) * 2.0 - 1.0
        return self.module.encode(x[:, :, None]).latent_dist.mode()[:, :, 0].float()

    @torch.no_grad()
    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """[B,64,h,w] (of a [B,64,T,h,w] latent the first frame, as ComfyUI's image VAEs) -> IMAGE [B,H,W,4]."""
        if latent.dim() == 5:
            latent = latent[:, :, 0]
        if latent.dim() != 4 or latent.shape[1] != self.latent_channels:
            raise ValueError(f"this VAE takes [B,{self.latent_channels},h,w] latents, got {tuple(latent.shape)}")
        x = self.module.decode(latent[:, :, None].to(self.module.dtype)).sample[:, :, 0].float()
        return ((x + 1.0) / 2.0).clamp(0.0, 1.0).movedim(1, -1)


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> QwenImage21VAE:
    """The VAE of a Qwen-Image 2.1 VAE file (bare or under `vae.`), computing in float32 as ComfyUI's VAE does
    on a CPU."""
    path = ref.sources[0] if ref.sources else None
    prefix = find_prefix(state_dict.keys(), WAN_VAE_MARKER)
    shapes = {k: tuple(v.shape) for k, v in state_dict.items()}
    if prefix is None or not is_qwen_image21_vae(shapes, prefix):
        raise ModelLoadError(
            path,
            "no Qwen-Image 2.1 VAE weights (the Wan 2.2 layout with one-frame kernels, "
            f"{WAN22_VAE_MARKER} and a 5-D {HEAD}) in the file",
        )
    sd = strip_prefix(state_dict, prefix)
    try:
        config = infer_config(sd)
        converted = to_diffusers(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Qwen-Image 2.1 VAE: {e}") from None
    module = build_module(lambda: AutoencoderKLQwenImage21(**config), converted, path, "Qwen-Image 2.1 VAE")
    return QwenImage21VAE(arch="qwen_image21", module=module, latent_channels=int(config["z_dim"]), downscale=DOWNSCALE)
