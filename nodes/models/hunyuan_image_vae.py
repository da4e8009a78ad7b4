"""The Hunyuan Image 2.1 VAE (vae/hunyuan_image_2.1_vae_fp16.safetensors): a 2-D KL autoencoder with 64 latent
channels at 1/32 of the image size, whose down- and up-samplers are pixel (un)shuffles with a channel-averaged
shortcut. The file is in the authors' ldm-like names (`encoder.down.N.block.M`, `encoder.down.N.downsample.conv`,
`decoder.up.N.upsample.conv`, `mid.block_1` / `attn_1` / `block_2`), as ComfyUI 0.3.64's comfy/sd.py reads it:
it tells this VAE by `decoder.conv_in.weight` taking 64 channels (a 2-D convolution, unlike the refiner's).

The network is diffusers' AutoencoderKLHunyuanImage, its widths read from the file (ComfyUI fixes the published
128..1024); the key names follow diffusers' own conversion script for the authors' checkpoint. ComfyUI's
conventions around it: pixels 0..1 in [B,H,W,3] as 2x-1, the posterior's mode, decoded images clamped (x+1)/2.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch

from cluster.refs import ModelRef
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.safetensors_io import build_module
from nodes.models.vae import KLVAE

MARKER = "decoder.conv_in.weight"
LATENT_CHANNELS = 64
DOWNSCALE = 32
_MID = {
    "mid.block_1.": "mid_block.resnets.0.",
    "mid.attn_1.": "mid_block.attentions.0.",
    "mid.block_2.": "mid_block.resnets.1.",
}
_ATTN = {"q.": "to_q.", "k.": "to_k.", "v.": "to_v.", "proj_out.": "proj."}
_STAGE = re.compile(r"^(encoder|decoder)\.(down|up)\.(\d+)\.(block\.(\d+)|downsample|upsample)\.(.*)$")


def is_hunyuan_image_vae(shapes: Mapping[str, tuple[int, ...]], prefix: str = "") -> bool:
    """ComfyUI 0.3.64's test: a 2-D decoder input convolution that takes 64 latent channels."""
    shape = shapes.get(prefix + MARKER)
    return shape is not None and len(shape) == 4 and shape[1] == LATENT_CHANNELS


def _stage_sizes(sd: Mapping[str, torch.Tensor], part: str, stage: str) -> list[tuple[int, bool]]:
    """(resnet count, has a resampler) per stage of `part` (encoder/down or decoder/up), in the file's order."""
    found: dict[int, tuple[set[int], bool]] = {}
    for key in sd:
        m = _STAGE.match(key)
        if m is None or m.group(1) != part or m.group(2) != stage:
            continue
        blocks, resample = found.setdefault(int(m.group(3)), (set(), False))
        if m.group(5) is not None:
            blocks.add(int(m.group(5)))
        else:
            found[int(m.group(3))] = (blocks, True)
    if sorted(found) != list(range(len(found))):
        raise ValueError(f"the {part}'s stages are not numbered 0..{len(found) - 1}")
    return [(len(found[i][0]), found[i][1]) for i in range(len(found))]


def to_diffusers_layout(state_dict: Mapping[str, torch.Tensor], path: str | None = None) -> dict[str, torch.Tensor]:
    """AutoencoderKLHunyuanImage's names from the authors' (bare, `vae.` or `first_stage_model.`): each stage's
    resnets and then its resampler numbered on in one flat list (diffusers' down_blocks / up_blocks)."""
    prefix = find_prefix(state_dict.keys(), MARKER)
    if prefix is None or state_dict[prefix + MARKER].dim() != 4:
        raise ModelLoadError(path, "not a Hunyuan Image 2.1 VAE (no 2-D decoder.conv_in weight)")
    sd = strip_prefix(state_dict, prefix)
    if any(k.startswith(("encoder.down_blocks.", "decoder.up_blocks.")) for k in sd):
        return dict(sd)  # already diffusers' names
    flat: dict[tuple[str, int, str], int] = {}
    for part, stage in (("encoder", "down"), ("decoder", "up")):
        index = 0
        for i, (blocks, resample) in enumerate(_stage_sizes(sd, part, stage)):
            for j in range(blocks):
                flat[(part, i, f"block.{j}")] = index
                index += 1
            if resample:
                flat[(part, i, "downsample" if stage == "down" else "upsample")] = index
                index += 1
    out = {}
    for key, value in sd.items():
        m = _STAGE.match(key)
        if m is not None:
            part, stage, i, where, rest = m.group(1), m.group(2), int(m.group(3)), m.group(4), m.group(6)
            rest = rest.replace("nin_shortcut.", "conv_shortcut.")
            new = f"{part}.{stage}_blocks.{flat[(part, i, where)]}.{rest}"
        else:
            new = key
            for old, mid in _MID.items():
                if f".{old}" in key:
                    head, tail = key.split(f".{old}", 1)
                    if old == "mid.attn_1.":
                        for a, b in _ATTN.items():
                            if tail.startswith(a):
                                tail = b + tail[len(a) :]
                    tail = tail.replace("nin_shortcut.", "conv_shortcut.")
                    new = f"{head}.{mid}{tail}"
        out[new] = value
    return out


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict:
    """AutoencoderKLHunyuanImage's config from a diffusers-layout state dict: the encoder's stage widths (a
    stage's resnets output its width), resnets per stage and the compression (2 per resampler)."""
    resnets = sorted({int(k.split(".")[2]) for k in sd if re.match(r"encoder\.down_blocks\.\d+\.conv1\.weight", k)})
    samplers = sorted({int(k.split(".")[2]) for k in sd if re.match(r"encoder\.down_blocks\.\d+\.conv\.weight", k)})
    if not resnets or not samplers:
        raise ValueError("the encoder has no resnets or no downsamplers")
    widths, per_stage, count = [], None, 0
    for index in sorted(resnets + samplers):
        if index in samplers:
            per_stage = per_stage or count
            count = 0
            continue
        if count == 0:
            widths.append(int(sd[f"encoder.down_blocks.{index}.conv1.weight"].shape[0]))
        count += 1
    per_stage = per_stage or count
    latent = int(sd[MARKER].shape[1])
    if latent != LATENT_CHANNELS:
        raise ValueError(f"the decoder takes {latent} latent channels, expected {LATENT_CHANNELS}")
    return {
        "in_channels": int(sd["encoder.conv_in.weight"].shape[1]),
        "out_channels": int(sd["decoder.conv_out.weight"].shape[0]),
        "latent_channels": latent,
        "block_out_channels": tuple(widths),
        "layers_per_block": per_stage,
        "spatial_compression_ratio": 2 ** len(samplers),
        "sample_size": 2 ** len(samplers) * 16,
    }


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> KLVAE:
    """The Hunyuan Image 2.1 VAE of a file (computed in float32, as ComfyUI's VAE runs on a CPU)."""
    from diffusers import AutoencoderKLHunyuanImage

    path = ref.sources[0] if ref.sources else None
    sd = to_diffusers_layout(state_dict, path)
    try:
        config = infer_config(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Hunyuan Image 2.1 VAE: {e}") from None
    module = build_module(
        lambda: AutoencoderKLHunyuanImage(**config), sd, path, "Hunyuan Image 2.1 VAE", dtype=torch.float32
    )
    return KLVAE(
        arch="hunyuan_image",
        module=module,
        latent_channels=config["latent_channels"],
        downscale=config["spatial_compression_ratio"],
    )
