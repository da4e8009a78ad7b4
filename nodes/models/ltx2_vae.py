"""LTX-2's video VAE from the checkpoint (ltx-2-19b-*.safetensors: `vae.encoder.*`, `vae.decoder.*` and the latent
statistics `vae.per_channel_statistics.*`, its block lists in the metadata `config` JSON's "vae" section).

ComfyUI 0.10.0 (comfy.sd.VAE) builds its CausalVideoAutoencoder from that section: the encoder's and decoder's
block lists (res_x stages between compressions), 128 base channels, patch size, pixel norm, the decoder's
causality and timestep conditioning. The same network is diffusers' AutoencoderKLLTX2Video, its widths and depths
read here from the block lists and its keys converted with diffusers' own LTX-2 VAE mapping. ComfyUI's
conventions around it: latents are normalised with the file's mean-of-means / std-of-means, pixels go in as
2x-1 and come out clamped (x+1)/2, a batch of images is one video whose frame count must be 1 + 8k.
A decoder with timestep conditioning (ComfyUI mixes seeded-less noise into the latent before decoding it) is
refused by name."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import torch
from diffusers import AutoencoderKLLTX2Video
from diffusers.loaders.single_file_utils import convert_ltx2_vae_to_diffusers

from cluster.refs import ModelRef
from nodes.models.components import VAEModel
from nodes.models.errors import ModelLoadError
from nodes.models.ltx2 import file_metadata
from nodes.models.safetensors_io import build_module

MARKER = "decoder.up_blocks.0.res_blocks.0.conv1.conv.weight"  # ComfyUI's test for a Lightricks VAE
BASE_CHANNELS = 128  # ComfyUI's Encoder/Decoder default, which its VideoVAE never overrides
SPATIAL, TEMPORAL = 32, 8
DOWNSAMPLE_KINDS = {
    "compress_space_res": "spatial",
    "compress_time_res": "temporal",
    "compress_all_res": "spatiotemporal",
}


def vae_stages(blocks: list, compress: tuple[str, ...], what: str) -> tuple[list[int], list[int], list[str]]:
    """(res_x depths, compression multipliers, compression names) of a block list alternating res_x and a
    compression, starting and ending with res_x."""
    depths, mults, kinds = [], [], []
    for i, (name, params) in enumerate(blocks):
        if (name == "res_x") != (i % 2 == 0) or (name != "res_x" and name not in compress):
            raise ValueError(f"{what} block {i} ({name}) is not supported: res_x and {'/'.join(compress)} alternate")
        if name == "res_x":
            depths.append(int(params["num_layers"]))
        else:
            mults.append(int(params.get("multiplier", 2 if what == "encoder" else 1)))
            kinds.append(name)
    if len(depths) != len(mults) + 1:
        raise ValueError(f"the {what} block list must end with res_x")
    return depths, mults, kinds


def diffusers_config(vae: Mapping[str, Any]) -> dict[str, Any]:
    """AutoencoderKLLTX2Video's arguments for a file's "vae" config (ComfyUI's names and defaults)."""
    if vae.get("timestep_conditioning", False):
        raise ValueError("a VAE decoder with timestep conditioning (noise mixed in before decoding) is not supported")
    if vae.get("norm_layer", "group_norm") != "pixel_norm" or vae.get("latent_log_var", "per_channel") != "uniform":
        raise ValueError("only pixel_norm VAEs with a uniform log-variance (LTX-2's) are supported")
    depths, mults, kinds = vae_stages(vae["encoder_blocks"], tuple(DOWNSAMPLE_KINDS), "encoder")
    dec_depths, dec_mults, _ = vae_stages(vae["decoder_blocks"], ("compress_all",), "decoder")
    widths, width = [], BASE_CHANNELS
    for m in mults:
        width *= m
        widths.append(width)
    dec_widths, width = [], BASE_CHANNELS
    for m in dec_mults:
        width *= m
        dec_widths.append(width)
    return {
        "in_channels": vae.get("in_channels", 3),
        "out_channels": vae.get("out_channels", 3),
        "latent_channels": vae["latent_channels"],
        "block_out_channels": tuple(widths),
        "down_block_types": ("LTX2VideoDownBlock3D",) * len(widths),
        "layers_per_block": tuple(depths),
        "spatio_temporal_scaling": (True,) * len(widths),
        "downsample_type": tuple(DOWNSAMPLE_KINDS[k] for k in kinds),
        "decoder_block_out_channels": tuple(dec_widths),
        "decoder_layers_per_block": tuple(dec_depths),
        "decoder_spatio_temporal_scaling": (True,) * len(dec_widths),
        "decoder_inject_noise": (False,) * len(dec_depths),
        "upsample_type": ("spatiotemporal",) * len(dec_widths),
        "upsample_residual": (True,) * len(dec_widths),
        "upsample_factor": tuple(dec_mults),
        "timestep_conditioning": False,
        "patch_size": vae.get("patch_size", 1),
        "decoder_causal": bool(vae.get("causal_decoder", False)),
        "encoder_spatial_padding_mode": vae.get("spatial_padding_mode", "zeros"),
        "decoder_spatial_padding_mode": vae.get("spatial_padding_mode", "reflect"),
    }


class LTX2VideoVAE(VAEModel):
    """ComfyUI's LTX-2 VAE conventions on AutoencoderKLLTX2Video."""

    @torch.no_grad()
    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        """IMAGE [T,H,W,3] -> [1,128,1+(T-1)/8,H/32,W/32]: the frames of one video (1 + 8k of them), cropped to
        multiples of 32 as ComfyUI crops them, normalised with the file's statistics."""
        frames = pixels.shape[0]
        if (frames - 1) % TEMPORAL:
            raise ValueError(f"the LTX-2 VAE encodes 1 + 8k frames (1, 9, 17, ...), got {frames}")
        h, w = (pixels.shape[1] // SPATIAL) * SPATIAL, (pixels.shape[2] // SPATIAL) * SPATIAL
        if h == 0 or w == 0:
            raise ValueError(f"the LTX-2 VAE encodes frames of at least {SPATIAL}x{SPATIAL} pixels")
        top, left = (pixels.shape[1] - h) // 2, (pixels.shape[2] - w) // 2
        x = pixels[:, top : top + h, left : left + w, :3].movedim(-1, 0)[None].float() * 2.0 - 1.0
        module: AutoencoderKLLTX2Video = self.module
        mean = module.latents_mean.view(1, -1, 1, 1, 1)
        std = module.latents_std.view(1, -1, 1, 1, 1)
        return (module.encode(x).latent_dist.mode().float() - mean) / std

    def latent_statistics(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The file's per-channel mean-of-means and std-of-means that latents are normalised with."""
        module: AutoencoderKLLTX2Video = self.module
        return module.latents_mean.float().clone(), module.latents_std.float().clone()

    temporal_compression = TEMPORAL

    @staticmethod
    def decoded_size(dim: int, size: int) -> int:
        """Frames (dim 0) or pixels (1, 2) a latent extent decodes to: causal time 8(F-1)+1, space x32."""
        return max(0, size * TEMPORAL - (TEMPORAL - 1)) if dim == 0 else size * SPATIAL

    @staticmethod
    def decoded_position(dim: int, index: int) -> int:
        """Where latent index `index` lands in the decoded video (ComfyUI's index formula: x8 in time)."""
        return index * (TEMPORAL if dim == 0 else SPATIAL)

    @torch.no_grad()
    def decode_raw(self, latent: torch.Tensor) -> torch.Tensor:
        """[B,128,F,h,w] -> the decoder's output [B,3,8(F-1)+1,32h,32w] in -1..1, before ComfyUI's clamp."""
        if latent.dim() != 5 or latent.shape[1] != self.latent_channels:
            raise ValueError(
                f"the LTX-2 VAE decodes [batch, {self.latent_channels}, frames, height, width] latents, "
                f"got {tuple(latent.shape)}"
            )
        module: AutoencoderKLLTX2Video = self.module
        z = latent.float() * module.latents_std.view(1, -1, 1, 1, 1) + module.latents_mean.view(1, -1, 1, 1, 1)
        return module.decode(z).sample.float()

    @staticmethod
    def to_image(x: torch.Tensor) -> torch.Tensor:
        """Decoder output [B,3,T,H,W] -> IMAGE [B*T,H,W,3] in 0..1."""
        image = ((x + 1.0) / 2.0).clamp(0.0, 1.0).movedim(1, -1)  # [B,T,H,W,3]
        return image.reshape(-1, *image.shape[2:])

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """[B,128,F,h,w] -> IMAGE [B*(8(F-1)+1),32h,32w,3]."""
        return self.to_image(self.decode_raw(latent))


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> LTX2VideoVAE:
    """The video VAE of an LTX-2 checkpoint (or a bare VAE file with the same metadata); float32 compute."""
    from nodes.models import ltx25_vae

    if ltx25_vae.is_ltx25_vae(state_dict) or ltx25_vae.is_ltx25_vae(state_dict, "vae."):
        return ltx25_vae.load_vae(ref, state_dict)
    path = ref.sources[0] if ref.sources else None
    prefix = "vae." if "vae." + MARKER in state_dict else "" if MARKER in state_dict else None
    if prefix is None:
        raise ModelLoadError(path, f"no LTX-2 video VAE weights ({MARKER}) in the file")
    sd = {k[len(prefix) :]: v.float() for k, v in state_dict.items() if k.startswith(prefix)}
    try:
        meta = file_metadata(path)
        vae = json.loads(meta["config"])["vae"] if "config" in meta else None
        if vae is None:
            raise ValueError("its metadata has no 'config' with a 'vae' section (the block lists)")
        kwargs = diffusers_config(vae)
    except (KeyError, TypeError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable LTX-2 video VAE: {e}") from None
    converted = convert_ltx2_vae_to_diffusers({"vae." + k: v for k, v in sd.items()})
    module = build_module(lambda: AutoencoderKLLTX2Video(**kwargs), converted, path, "LTX-2 video VAE")
    return LTX2VideoVAE(arch="ltx2", module=module, latent_channels=kwargs["latent_channels"], downscale=SPATIAL)
