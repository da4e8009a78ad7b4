"""The Wan 2.2 VAE (vae/wan2.2_vae.safetensors, Wan 2.2 5B's): 48 latent channels at 1/16 of the size (2x2
pixel patches, then three 2x downsamplings), 4x in time, in Wan's own key layout as ComfyUI loads it
(`encoder.downsamples.N.downsamples.M.residual.2`, `decoder.upsamples.N.upsamples.M`, `conv1`/`conv2` for the
quant convs). It runs as diffusers' AutoencoderKLWan with `is_residual` (Wan 2.2's residual down/up blocks);
diffusers' single-file converter knows only the Wan 2.1 layout, so the names are mapped here, one rule per part.
The widths are read from the tensors (ComfyUI fixes them at 160 and 256 for the released file)."""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch
from diffusers import AutoencoderKLWan

from cluster.refs import ModelRef
from nodes.models.detect import WAN22_VAE_MARKER, WAN_VAE_MARKER
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.qwen_image_vae import WanVAE
from nodes.models.safetensors_io import build_module

DOWNSCALE = 16
RES_BLOCKS = 2
_RESIDUAL = {
    "residual.0.gamma": "norm1.gamma",
    "residual.2.": "conv1.",
    "residual.3.gamma": "norm2.gamma",
    "residual.6.": "conv2.",
    "shortcut.": "conv_shortcut.",
}
_FIXED = {
    "encoder.conv1.": "encoder.conv_in.",
    "decoder.conv1.": "decoder.conv_in.",
    "encoder.head.0.": "encoder.norm_out.",
    "encoder.head.2.": "encoder.conv_out.",
    "decoder.head.0.": "decoder.norm_out.",
    "decoder.head.2.": "decoder.conv_out.",
    "conv1.": "quant_conv.",
    "conv2.": "post_quant_conv.",
}


def diffusers_name(key: str) -> str:
    """One Wan 2.2 VAE tensor name -> AutoencoderKLWan's."""
    for ours, theirs in _FIXED.items():
        if key.startswith(ours):
            return theirs + key[len(ours) :]
    m = re.match(r"(encoder|decoder)\.middle\.(\d)\.(.*)", key)
    if m:
        side, index, rest = m.groups()
        part = {"0": "resnets.0.", "1": "attentions.0.", "2": "resnets.1."}[index]
        return f"{side}.mid_block.{part}{_residual(rest)}"
    m = re.match(r"encoder\.downsamples\.(\d+)\.downsamples\.(\d+)\.(.*)", key)
    if m:
        level, block, rest = m.groups()
        where = "downsampler" if int(block) == RES_BLOCKS else f"resnets.{block}"
        return f"encoder.down_blocks.{level}.{where}.{_residual(rest)}"
    m = re.match(r"decoder\.upsamples\.(\d+)\.upsamples\.(\d+)\.(.*)", key)
    if m:
        level, block, rest = m.groups()
        where = "upsampler" if int(block) == RES_BLOCKS + 1 else f"resnets.{block}"
        return f"decoder.up_blocks.{level}.{where}.{_residual(rest)}"
    raise KeyError(key)


def _residual(rest: str) -> str:
    for ours, theirs in _RESIDUAL.items():
        if rest.startswith(ours):
            return theirs + rest[len(ours) :]
    return rest


def to_diffusers(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {diffusers_name(k): v for k, v in sd.items()}


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, object]:
    """AutoencoderKLWan's Wan 2.2 config from Wan-layout shapes: widths, latent and pixel-patch channels."""
    patch_channels = int(sd["encoder.conv1.weight"].shape[1])
    return {
        "base_dim": int(sd["encoder.conv1.weight"].shape[0]),
        "decoder_base_dim": int(sd["decoder.head.0.gamma"].shape[0]),
        "z_dim": int(sd["conv2.weight"].shape[0]),
        "is_residual": True,
        "in_channels": patch_channels,
        "out_channels": patch_channels,
        "patch_size": 2,
        "scale_factor_spatial": DOWNSCALE,
        "dim_mult": [1, 2, 4, 4],
        "num_res_blocks": RES_BLOCKS,
        "temperal_downsample": [False, True, True],
    }


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> WanVAE:
    """The Wan 2.2 VAE of a wan2.2_vae file (bare or under `vae.`), computing in float32 as ComfyUI's VAE does
    on a CPU; ComfyUI's conventions as for the Wan 2.1 VAE (a batch of images is one video)."""
    path = ref.sources[0] if ref.sources else None
    prefix = find_prefix(state_dict.keys(), WAN_VAE_MARKER)
    if prefix is None or prefix + WAN22_VAE_MARKER not in state_dict:
        raise ModelLoadError(path, "no Wan 2.2 VAE weights (decoder.upsamples.0.upsamples.0) in the file")
    sd = strip_prefix(state_dict, prefix)
    try:
        config = infer_config(sd)
        converted = to_diffusers(sd)
    except KeyError as e:
        raise ModelLoadError(path, f"not a usable Wan 2.2 VAE: {e} unexpected or missing") from None
    module = build_module(lambda: AutoencoderKLWan(**config), converted, path, "Wan 2.2 VAE")
    return WanVAE(arch="wan22_5b", module=module, latent_channels=int(config["z_dim"]), downscale=DOWNSCALE)
