"""LTX-2.5's video VAE file (vae/ltx-2.5-video-vae-bf16.safetensors): LTX-2's convolutional encoder (`encoder.*`),
the diffusion decoder (`decoder.*`, nodes/models/ltx25_decoder.py) and the latent statistics
(`per_channel_statistics.{mean-of-means,std-of-means}`); the metadata `config` JSON's "vae" section holds an
"encoder" (LTX-2's block list under "blocks") and a "decoder" section. ComfyUI (comfy/sd.py) takes this branch when
the file has `decoder.conv_in_x_t.weight` and builds its CausalDiffusionVAE from that section, its own defaults
(the published sizes) where absent.

Conventions as ComfyUI's: encoding keeps the encoder's means (the file's "constant" log-variance channel is
dropped) normalised with the statistics; decoding un-normalises and runs the decoder, whose noise is seeded 0 on
every decode, so a decode is reproducible; pixels go in as 2x-1 and come out clamped (x+1)/2; frames decode as
8(F-1)+1 and pixels x32, as for LTX-2."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import torch
from diffusers.loaders.single_file_utils import convert_ltx2_vae_to_diffusers
from diffusers.models.autoencoders.autoencoder_kl_ltx2 import LTX2VideoEncoder3d

from cluster.refs import ModelRef
from nodes.models.errors import ModelLoadError
from nodes.models.ltx2 import file_metadata
from nodes.models.ltx2_vae import BASE_CHANNELS, DOWNSAMPLE_KINDS, SPATIAL, TEMPORAL, LTX2VideoVAE, vae_stages
from nodes.models.ltx25_decoder import DiffusionDecoder
from nodes.models.safetensors_io import build_module

MARKER = "decoder.conv_in_x_t.weight"  # ComfyUI's test for the diffusion-decoder VAE
# ComfyUI's defaults for a file without a config (its LTX_24_VAE_CONFIG), the published network's sizes.
DEFAULT_ENCODER = {
    "in_channels": 3,
    "out_channels": 128,
    "blocks": [
        ["res_x", {"num_layers": 4}],
        ["compress_space_res", {"multiplier": 2}],
        ["res_x", {"num_layers": 6}],
        ["compress_time_res", {"multiplier": 2}],
        ["res_x", {"num_layers": 4}],
        ["compress_all_res", {"multiplier": 2}],
        ["res_x", {"num_layers": 2}],
        ["compress_all_res", {"multiplier": 1}],
        ["res_x", {"num_layers": 2}],
    ],
    "patch_size": 4,
    "latent_log_var": "constant",
    "norm_layer": "pixel_norm",
    "spatial_padding_mode": "zeros",
}
DECODER_KEYS = (
    "in_channels",
    "out_channels",
    "patch_size",
    "head_dim",
    "stage_channels",
    "stage_depths",
    "stage_kernels",
    "upsamples",
    "stage5_kernel",
    "t_emb_dim",
    "timestep_scale_multiplier",
)


def is_ltx25_vae(keys, prefix: str = "") -> bool:
    return prefix + MARKER in keys


def encoder_kwargs(encoder: Mapping[str, Any]) -> dict[str, Any]:
    """LTX2VideoEncoder3d's arguments for a file's "encoder" section (ComfyUI's names and defaults)."""
    if encoder.get("norm_layer", "pixel_norm") != "pixel_norm":
        raise ValueError(f"encoder norm_layer {encoder.get('norm_layer')!r}: only pixel_norm is supported")
    if encoder.get("latent_log_var", "constant") not in ("constant", "uniform"):
        raise ValueError(f"encoder latent_log_var {encoder.get('latent_log_var')!r}: only constant or uniform")
    depths, mults, kinds = vae_stages(
        encoder.get("blocks", DEFAULT_ENCODER["blocks"]), tuple(DOWNSAMPLE_KINDS), "encoder"
    )
    widths, width = [], int(encoder.get("base_channels", BASE_CHANNELS))
    for m in mults:
        width *= m
        widths.append(width)
    return {
        "in_channels": int(encoder.get("in_channels", 3)),
        "out_channels": int(encoder.get("out_channels", 128)),
        "block_out_channels": tuple(widths),
        "down_block_types": ("LTX2VideoDownBlock3D",) * len(widths),
        "spatio_temporal_scaling": (True,) * len(widths),
        "layers_per_block": tuple(depths),
        "downsample_type": tuple(DOWNSAMPLE_KINDS[k] for k in kinds),
        "patch_size": int(encoder.get("patch_size", 4)),
        "spatial_padding_mode": encoder.get("spatial_padding_mode", "zeros"),
    }


def decoder_kwargs(decoder: Mapping[str, Any]) -> dict[str, Any]:
    """DiffusionDecoder's arguments for a file's "decoder" section (absent keys keep ComfyUI's defaults)."""
    if decoder.get("default_num_inference_steps", 1) != 1:
        raise ValueError("only single-step (default_num_inference_steps 1) diffusion decoders are supported")
    out = {k: decoder[k] for k in DECODER_KEYS if k in decoder}
    for key in ("stage_kernels",):
        if key in out:
            out[key] = tuple(tuple(k) for k in out[key])
    if "upsamples" in out:
        out["upsamples"] = tuple((tuple(s), int(r)) for s, r in out["upsamples"])
    return out


class DiffusionVAEModule(torch.nn.Module):
    def __init__(self, encoder: dict[str, Any], decoder: dict[str, Any], latent_channels: int) -> None:
        super().__init__()
        self.encoder = LTX2VideoEncoder3d(**encoder)
        self.decoder = DiffusionDecoder(**decoder)
        self.register_buffer("latents_mean", torch.zeros(latent_channels))
        self.register_buffer("latents_std", torch.ones(latent_channels))


class LTX25VideoVAE(LTX2VideoVAE):
    """LTX-2's VAE conventions with the diffusion decoder."""

    @torch.no_grad()
    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        """IMAGE [T,H,W,3] (1 + 8k frames) -> [1,C,1+(T-1)/8,H/32,W/32], cropped and normalised as for LTX-2."""
        frames = pixels.shape[0]
        if (frames - 1) % TEMPORAL:
            raise ValueError(f"the LTX-2.5 VAE encodes 1 + 8k frames (1, 9, 17, ...), got {frames}")
        h, w = (pixels.shape[1] // SPATIAL) * SPATIAL, (pixels.shape[2] // SPATIAL) * SPATIAL
        if h == 0 or w == 0:
            raise ValueError(f"the LTX-2.5 VAE encodes frames of at least {SPATIAL}x{SPATIAL} pixels")
        top, left = (pixels.shape[1] - h) // 2, (pixels.shape[2] - w) // 2
        x = pixels[:, top : top + h, left : left + w, :3].movedim(-1, 0)[None].float() * 2.0 - 1.0
        module = self.module
        means = module.encoder(x)[:, : self.latent_channels].float()  # the log-variance channel(s) dropped
        return (means - module.latents_mean.view(1, -1, 1, 1, 1)) / module.latents_std.view(1, -1, 1, 1, 1)

    @torch.no_grad()
    def decode_raw(self, latent: torch.Tensor) -> torch.Tensor:
        """[B,C,F,h,w] -> the decoder's x0 [B,3,8(F-1)+1,32h,32w], before ComfyUI's clamp."""
        if latent.dim() != 5 or latent.shape[1] != self.latent_channels:
            raise ValueError(
                f"the LTX-2.5 VAE decodes [batch, {self.latent_channels}, frames, height, width] latents, "
                f"got {tuple(latent.shape)}"
            )
        module = self.module
        z = latent.float() * module.latents_std.view(1, -1, 1, 1, 1) + module.latents_mean.view(1, -1, 1, 1, 1)
        return module.decoder(z).float()


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> LTX25VideoVAE:
    """The LTX-2.5 video VAE of a bare VAE file (or one under `vae.`); float32 compute."""
    path = ref.sources[0] if ref.sources else None
    prefix = "vae." if "vae." + MARKER in state_dict else "" if MARKER in state_dict else None
    if prefix is None:
        raise ModelLoadError(path, f"no LTX-2.5 diffusion VAE ({MARKER}) in the file")
    sd = {k[len(prefix) :]: v for k, v in state_dict.items() if k.startswith(prefix)}
    try:
        meta = file_metadata(path)
        config = (json.loads(meta["config"]).get("vae") if "config" in meta else None) or {}
        enc = encoder_kwargs(config.get("encoder", DEFAULT_ENCODER))
        dec = decoder_kwargs(config.get("decoder", {}))
    except (KeyError, TypeError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable LTX-2.5 video VAE: {e}") from None
    encoder_side = {"vae." + k: v for k, v in sd.items() if k.startswith(("encoder.", "per_channel_statistics."))}
    converted = convert_ltx2_vae_to_diffusers(encoder_side)
    weights = {k: v for k, v in converted.items() if k.startswith("encoder.") or k in ("latents_mean", "latents_std")}
    # the decoder's checkpoint-only `type_emb`, which neither ComfyUI's decoder nor Lightricks' reads
    weights.update({k: v for k, v in sd.items() if k.startswith("decoder.") and k != "decoder.type_emb"})
    channels = enc["out_channels"]
    module = build_module(lambda: DiffusionVAEModule(enc, dec, channels), weights, path, "LTX-2.5 video VAE")
    return LTX25VideoVAE(arch="ltx2", module=module, latent_channels=channels, downscale=SPATIAL)
