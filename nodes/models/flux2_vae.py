"""The FLUX.2 autoencoder (flux2-vae.safetensors): a KL VAE with 32 latent channels whose latents are cut into
2x2 patches (128 channels at 1/16 of the image size) and standardised by the batch-norm statistics stored in
the file (`bn.running_mean`, `bn.running_var`, eps 1e-4), as ComfyUI's VAE does with batch_norm_latent and
diffusers' Flux2 pipelines do around AutoencoderKLFlux2. LATENT holds these standardised 128-channel latents."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from diffusers import AutoencoderKLFlux2

from cluster.refs import ModelRef
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.safetensors_io import build_module
from nodes.models.vae import KLVAE, diffusers_config, is_diffusers_layout, ldm_to_diffusers

BN_MARKER = "bn.running_mean"
PATCH = 2
# BFL's layout keeps the quant convs inside encoder/decoder; ComfyUI and diffusers put them at the top level.
_NESTED_QUANT = {"encoder.quant_conv.": "quant_conv.", "decoder.post_quant_conv.": "post_quant_conv."}


def patchify(z: torch.Tensor) -> torch.Tensor:
    """[B,C,H,W] -> [B,4C,H/2,W/2], channel c*4 + 2*row + column of each 2x2 patch."""
    b, c, h, w = z.shape
    return (
        z.reshape(b, c, h // PATCH, PATCH, w // PATCH, PATCH)
        .permute(0, 1, 3, 5, 2, 4)
        .reshape(b, c * PATCH * PATCH, h // PATCH, w // PATCH)
    )


def unpatchify(z: torch.Tensor) -> torch.Tensor:
    b, c, h, w = z.shape
    return (
        z.reshape(b, c // (PATCH * PATCH), PATCH, PATCH, h, w)
        .permute(0, 1, 4, 2, 5, 3)
        .reshape(b, c // (PATCH * PATCH), h * PATCH, w * PATCH)
    )


class Flux2VAE(KLVAE):
    """ComfyUI's conventions (pixels 0..1 [B,H,W,3]) with FLUX.2's patched, standardised latents."""

    def _stats(self, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        bn = self.module.bn
        mean = bn.running_mean.view(1, -1, 1, 1).to(like.device, like.dtype)
        std = torch.sqrt(bn.running_var.view(1, -1, 1, 1) + self.module.config.batch_norm_eps).to(
            like.device, like.dtype
        )
        return mean, std

    @torch.no_grad()
    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        z = patchify(super().encode(pixels))
        mean, std = self._stats(z)
        return (z - mean) / std

    @torch.no_grad()
    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        if latent.shape[1] != self.latent_channels:
            raise ValueError(f"this VAE takes {self.latent_channels}-channel latents, got {latent.shape[1]}")
        latent = latent.float()
        mean, std = self._stats(latent)
        z = unpatchify(latent * std + mean)
        x = self.module.decode(z.to(self.module.dtype)).sample.float()
        return ((x + 1.0) / 2.0).clamp(0.0, 1.0).movedim(1, -1)


def to_diffusers_layout(state_dict: Mapping[str, torch.Tensor], path: str | None) -> dict[str, torch.Tensor]:
    """AutoencoderKLFlux2's keys from a BFL/ComfyUI (ldm names, quant convs nested or not) or diffusers file,
    optionally `vae.`-prefixed."""
    prefix = find_prefix(state_dict.keys(), "decoder.conv_in.weight")
    if prefix is None or f"{prefix}{BN_MARKER}" not in state_dict:
        raise ModelLoadError(path, "not a FLUX.2 VAE (no decoder.conv_in and bn.running_mean weights)")
    sd = strip_prefix(state_dict, prefix)
    for nested, top in _NESTED_QUANT.items():
        sd = {(top + k[len(nested) :] if k.startswith(nested) else k): v for k, v in sd.items()}
    if not is_diffusers_layout(sd):
        sd = ldm_to_diffusers(sd, path)
    # The batch count is a training statistic that inference never reads; many files leave it out.
    sd.setdefault("bn.num_batches_tracked", torch.tensor(0, dtype=torch.long))
    return sd


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> Flux2VAE:
    path = ref.sources[0] if ref.sources else None
    sd = to_diffusers_layout(state_dict, path)
    config = diffusers_config(sd, path)
    # FLUX.2's small-decoder VAEs (MOSS-Image's flux2-vae_small, full_encoder_small_decoder) keep the encoder and
    # narrow the decoder: its widths, in encoder order, from the up blocks (the first up block is the widest)
    levels = len(config["block_out_channels"])
    decoder = tuple(
        int(sd[f"decoder.up_blocks.{levels - 1 - i}.resnets.0.conv2.weight"].shape[0]) for i in range(levels)
    )
    if decoder != tuple(config["block_out_channels"]):
        config["decoder_block_out_channels"] = decoder
    if sd[BN_MARKER].shape[0] != PATCH * PATCH * config["latent_channels"]:
        raise ModelLoadError(
            path,
            f"the FLUX.2 VAE's batch norm has {sd[BN_MARKER].shape[0]} channels, expected "
            f"{PATCH * PATCH} x {config['latent_channels']}",
        )
    module = build_module(lambda: AutoencoderKLFlux2(**config), sd, path, "FLUX.2 VAE", dtype=torch.float32)
    return Flux2VAE(
        arch="flux2",
        module=module,
        latent_channels=PATCH * PATCH * config["latent_channels"],
        downscale=PATCH * 2 ** (len(config["block_out_channels"]) - 1),
    )
