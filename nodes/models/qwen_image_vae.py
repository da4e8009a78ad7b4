"""Qwen-Image's VAE (vae/qwen_image_vae.safetensors): the Wan 2.1 causal video VAE, 16 latent channels, 8x
spatial downscale, in Wan's key layout as ComfyUI loads it (`encoder.downsamples.N.residual.2`, `conv1`/`conv2`
for the quant convs). It runs as diffusers' AutoencoderKLQwenImage, converted with diffusers' own Wan VAE
key mapping; the width and latent channels are read from the tensors, the block structure is Wan 2.1's.

ComfyUI's conventions: pixels 0..1 -> -1..1 in, one frame per image; outputs clamped back to 0..1. Latents
stay raw (WAN21_LATENT standardises them per channel for the diffusion model)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import pairwise

import torch
from diffusers import AutoencoderKLQwenImage
from diffusers.loaders.single_file_utils import convert_wan_vae_to_diffusers

from cluster.refs import ModelRef
from nodes.models.components import VAEModel
from nodes.models.detect import WAN22_VAE_MARKER, WAN_VAE_MARKER
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.safetensors_io import build_module
from nodes.models.vae import crop_to_multiple

DOWNSCALE = 8
# Wan 2.1's structure (ComfyUI fixes it; the tiny demo keeps it): width multipliers, 2 residual blocks per
# level, time downsampling after levels 1 and 2.
DIM_MULT = (1, 2, 4, 4)
RES_BLOCKS = 2
TIME_DOWN = (False, True, True)


def _residual(name: str, shortcut: bool) -> Iterator[str]:
    yield from (f"{name}.residual.0.gamma", f"{name}.residual.3.gamma")
    for conv in ("residual.2", "residual.6") + (("shortcut",) if shortcut else ()):
        yield from (f"{name}.{conv}.weight", f"{name}.{conv}.bias")


def _conv(name: str) -> Iterator[str]:
    yield from (f"{name}.weight", f"{name}.bias")


def _middle(side: str) -> Iterator[str]:
    yield from _residual(f"{side}.middle.0", False)
    yield f"{side}.middle.1.norm.gamma"
    yield from _conv(f"{side}.middle.1.to_qkv")
    yield from _conv(f"{side}.middle.1.proj")
    yield from _residual(f"{side}.middle.2", False)


def wan_vae_keys() -> list[str]:
    """Every tensor name of a Wan 2.1 VAE in Wan's (ComfyUI's) layout, in module order."""
    keys = [*_conv("encoder.conv1")]
    dims = [1] + list(DIM_MULT)
    n = 0
    for level, (a, b) in enumerate(pairwise(dims)):
        for r in range(RES_BLOCKS):
            keys += _residual(f"encoder.downsamples.{n}", r == 0 and a != b)
            n += 1
        if level < len(DIM_MULT) - 1:
            keys += _conv(f"encoder.downsamples.{n}.resample.1")
            if TIME_DOWN[level]:
                keys += _conv(f"encoder.downsamples.{n}.time_conv")
            n += 1
    keys += [
        *_middle("encoder"),
        "encoder.head.0.gamma",
        *_conv("encoder.head.2"),
        *_conv("conv1"),
        *_conv("conv2"),
        *_conv("decoder.conv1"),
        *_middle("decoder"),
    ]
    # Decoder widths, in multiples of the base width: the last level's, then the levels in reverse.
    up = [DIM_MULT[-1]] + list(DIM_MULT[::-1])
    n = 0
    for level, (a, b) in enumerate(pairwise(up)):
        a = a / 2 if level > 0 else a  # Wan halves the input after each upsampling
        for r in range(RES_BLOCKS + 1):
            keys += _residual(f"decoder.upsamples.{n}", r == 0 and a != b)
            n += 1
        if level < len(DIM_MULT) - 1:
            keys += _conv(f"decoder.upsamples.{n}.resample.1")
            if TIME_DOWN[::-1][level]:
                keys += _conv(f"decoder.upsamples.{n}.time_conv")
            n += 1
    return keys + ["decoder.head.0.gamma", *_conv("decoder.head.2")]


def diffusers_names() -> dict[str, str]:
    """Wan name -> AutoencoderKLQwenImage name, as diffusers' single-file loader maps them."""
    keys = wan_vae_keys()
    converted = convert_wan_vae_to_diffusers({k: i for i, k in enumerate(keys)})
    return {keys[i]: name for name, i in converted.items()}


def wan_to_diffusers(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return convert_wan_vae_to_diffusers(dict(sd))


def diffusers_to_wan(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inverse of `wan_to_diffusers` (the demo VAE is written in ComfyUI's layout with it)."""
    back = {d: w for w, d in diffusers_names().items()}
    return {back[k]: v for k, v in sd.items()}


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, object]:
    """AutoencoderKLQwenImage's config from Wan-layout shapes: base width and latent channels."""
    return {
        "base_dim": int(sd["encoder.conv1.weight"].shape[0]),
        "z_dim": int(sd["conv2.weight"].shape[0]),
        "dim_mult": list(DIM_MULT),
        "num_res_blocks": RES_BLOCKS,
        "temperal_downsample": list(TIME_DOWN),
        # 3 (RGB) or Qwen-Image-Layered's 4 (RGBA): ComfyUI reads it from encoder.conv1 as well
        "input_channels": int(sd["encoder.conv1.weight"].shape[1]),
    }


class WanVAE(VAEModel):
    """ComfyUI's Wan 2.1 VAE conventions on AutoencoderKLQwenImage: each image one frame. An RGBA VAE
    (Qwen-Image-Layered's) takes IMAGE with 3 channels padded by an opaque alpha (1.0), as ComfyUI's
    pad_channel_value has it, and decodes 4-channel IMAGE."""

    @property
    def image_channels(self) -> int:
        return int(getattr(self.module.config, "input_channels", 3))

    def channels_in(self, pixels: torch.Tensor) -> torch.Tensor:
        """IMAGE [..., C] cut or padded (alpha 1.0) to the VAE's channels."""
        n = self.image_channels
        if pixels.shape[-1] >= n:
            return pixels[..., :n]
        return torch.nn.functional.pad(pixels, (0, n - pixels.shape[-1]), value=1.0)

    @torch.no_grad()
    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        pixels = crop_to_multiple(pixels, self.downscale)
        x = self.channels_in(pixels).movedim(-1, 1).to(self.module.dtype) * 2.0 - 1.0
        return self.module.encode(x[:, :, None]).latent_dist.mode()[:, :, 0].float()

    @torch.no_grad()
    def encode_video(self, pixels: torch.Tensor) -> torch.Tensor:
        """IMAGE [T,H,W,3] as ComfyUI's Wan VAE encodes a batch: the frames of one video -> [1,16,1+(T-1)//4,h,w]
        (the first frame alone, then four frames per latent frame)."""
        pixels = crop_to_multiple(pixels, self.downscale)
        x = self.channels_in(pixels).movedim(-1, 0)[None].to(self.module.dtype) * 2.0 - 1.0
        return self.module.encode(x).latent_dist.mode().float()

    @torch.no_grad()
    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """[B,16,h,w] or ComfyUI's [B,16,T,h,w] -> IMAGE [B*T,H,W,3] (4 for an RGBA VAE)."""
        if latent.shape[1] != self.latent_channels:
            raise ValueError(f"this VAE takes {self.latent_channels}-channel latents, got {latent.shape[1]}")
        z = latent if latent.dim() == 5 else latent[:, :, None]
        x = self.module.decode(z.to(self.module.dtype)).sample.float()
        image = ((x + 1.0) / 2.0).clamp(0.0, 1.0).movedim(1, -1)  # [B,T,H,W,C]
        return image.reshape(-1, *image.shape[2:])


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> WanVAE:
    """The Wan 2.1 VAE of a qwen_image_vae file (bare or under `vae.`), computing in float32 as ComfyUI's VAE
    does on a CPU."""
    path = ref.sources[0] if ref.sources else None
    prefix = find_prefix(state_dict.keys(), WAN_VAE_MARKER)
    if prefix is None:
        raise ModelLoadError(path, "no Wan VAE weights (decoder.middle.0.residual.0.gamma) in the file")
    sd = strip_prefix(state_dict, prefix)
    if WAN22_VAE_MARKER in sd:
        raise ModelLoadError(
            path,
            "the Wan 2.2 VAE (48 latent channels) is not supported; Qwen-Image uses "
            "the Wan 2.1 VAE (qwen_image_vae.safetensors)",
        )
    try:
        config = infer_config(sd)
    except KeyError as e:
        raise ModelLoadError(path, f"not a usable Wan 2.1 VAE: no {e}") from None
    module = build_module(lambda: AutoencoderKLQwenImage(**config), wan_to_diffusers(sd), path, "Wan 2.1 VAE")
    return WanVAE(arch="qwen_image", module=module, latent_channels=int(config["z_dim"]), downscale=DOWNSCALE)
