"""MiniMax H3's video VAE from the file ComfyUI users download (vae/minimax_h3_video_vae*.safetensors: the
reference model's own names, as ComfyUI's comfy/ldm/minimax/vae.py reads them: `encoder.down.N.block.M`,
`decoder.x_embedder`, `decoder.transformer_blocks.N.attn.to_qkv`, `ff.w1`/`w2`, the `latents_mean`/`latents_std`
buffers), run on diffusers' AutoencoderKLMiniMaxH3: a causal 3D CNN encoder (1/16 space, 17 frames -> 5 latents
per clip) and a ViT decoder.

Two row orders differ from diffusers' and follow from how ComfyUI reads the tensors: the decoder's fused qkv is
viewed per head as [q k v] (so the rows interleave head by head), and the SwiGLU input projection stores
[gate; value] where diffusers reads [value; gate]. Sizes are read from the tensors; what the file does not hold
(the strides, the 64-wide decoder heads, 32 norm groups) is ComfyUI's fixed choice. `encode` and `decode` take
ComfyUI's view: frames in [0, 1], latents normalised by the file's per-channel mean and std.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from diffusers import AutoencoderKLMiniMaxH3
from diffusers.models.autoencoders.autoencoder_kl_minimax_h3 import (
    MiniMaxH3VideoRotaryPosEmbed,
)

from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix

MARKER = "decoder.register_tokens"
SPACE_DOWN = (2, 2, 2, 2, 1, 1)
TIME_DOWN = (1, 2, 2, 1, 1, 1)
DECODER_HEAD_DIM = 64
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_RENAMES = [
    (r"^encoder\.down\.(\d+)\.block\.", r"encoder.down_blocks.\1.resnets."),
    (r"^encoder\.down\.(\d+)\.downsample\.", r"encoder.down_blocks.\1.downsamplers.0."),
    (r"\.nin_shortcut\.", ".conv_shortcut."),
    (r"^decoder\.x_embedder\.", "decoder.proj_in."),
    (r"\.ff\.w1\.", ".ff.net.0.proj."),
    (r"\.ff\.w2\.", ".ff.net.2."),
    (r"\.attn\.to_out\.", ".attn.to_out.0."),
]


def is_minimax_h3_vae(keys: Iterable[str]) -> bool:
    keys = list(keys)
    prefix = find_prefix(keys, MARKER)
    return prefix is not None and prefix + "decoder.x_embedder.weight" in set(keys)


def infer_config(sd: Mapping[str, torch.Tensor], path: str | None = None) -> dict[str, Any]:
    """AutoencoderKLMiniMaxH3's config from an (unprefixed) file's shapes and buffers."""
    needed = (
        "decoder.x_embedder.weight",
        "latents_mean",
        "latents_std",
        "encoder.conv_out.weight",
        "decoder.proj_out.weight",
        "decoder.transformer_blocks.0.ff.w2.weight",
    )
    missing = [k for k in needed if k not in sd]
    if missing:
        raise ModelLoadError(path, f"not a complete MiniMax H3 video VAE: missing {', '.join(missing)}")
    levels = count_blocks(sd, "encoder.down")
    if levels != len(SPACE_DOWN):
        raise ModelLoadError(path, f"a MiniMax H3 video VAE has {len(SPACE_DOWN)} encoder levels, this one {levels}")
    dim, latent = (int(n) for n in sd["decoder.x_embedder.weight"].shape)
    if dim % DECODER_HEAD_DIM:
        raise ModelLoadError(path, f"decoder width {dim} is not a multiple of its {DECODER_HEAD_DIM}-wide heads")
    return {
        "latent_channels": latent,
        "block_out_channels": tuple(int(sd[f"encoder.down.{i}.block.0.conv1.weight"].shape[0]) for i in range(levels)),
        "layers_per_block": count_blocks(sd, "encoder.down.0.block"),
        "spatial_downsample_factors": SPACE_DOWN,
        "temporal_downsample_factors": TIME_DOWN,
        "decoder_num_layers": count_blocks(sd, "decoder.transformer_blocks"),
        "decoder_num_attention_heads": dim // DECODER_HEAD_DIM,
        "decoder_attention_head_dim": DECODER_HEAD_DIM,
        "decoder_num_register_tokens": int(sd[MARKER].shape[1]),
        "decoder_ffn_mult": int(sd["decoder.transformer_blocks.0.ff.w2.weight"].shape[1]) // dim,
        "latents_mean": tuple(float(v) for v in sd["latents_mean"]),
        "latents_std": tuple(float(v) for v in sd["latents_std"]),
    }


def to_diffusers(sd: Mapping[str, torch.Tensor], heads: int) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for key, value in sd.items():
        if key in ("latents_mean", "latents_std", "decoder.mask_token"):  # config / unused at inference
            continue
        for pattern, new in _RENAMES:
            key = re.sub(pattern, new, key)
        if ".attn.to_qkv." in key:  # ComfyUI views the rows as [heads, (q k v) x head_dim]
            rows = value.reshape(heads, 3, -1, *value.shape[1:])
            for i, name in enumerate("qkv"):
                out[key.replace(".to_qkv.", f".to_{name}.")] = rows[:, i].reshape(-1, *value.shape[1:]).clone()
            continue
        if ".ff.net.0.proj." in key:  # [gate; value] -> diffusers' [value; gate]
            value = torch.cat(value.chunk(2, dim=0)[::-1])
        out[key] = value
    return out


def from_diffusers(
    sd: Mapping[str, torch.Tensor], heads: int, latents_mean: torch.Tensor, latents_std: torch.Tensor
) -> dict[str, torch.Tensor]:
    """The published layout of a diffusers AutoencoderKLMiniMaxH3 state dict (for demo files)."""
    inverse = [
        (r"^encoder\.down_blocks\.(\d+)\.resnets\.", r"encoder.down.\1.block."),
        (r"^encoder\.down_blocks\.(\d+)\.downsamplers\.0\.", r"encoder.down.\1.downsample."),
        (r"\.conv_shortcut\.", ".nin_shortcut."),
        (r"^decoder\.proj_in\.", "decoder.x_embedder."),
        (r"\.ff\.net\.0\.proj\.", ".ff.w1."),
        (r"\.ff\.net\.2\.", ".ff.w2."),
        (r"\.attn\.to_out\.0\.", ".attn.to_out."),
    ]
    out = {"latents_mean": latents_mean.clone(), "latents_std": latents_std.clone()}
    for key, value in sd.items():
        if ".attn.to_k." in key or ".attn.to_v." in key:
            continue
        new = key
        for pattern, repl in inverse:
            new = re.sub(pattern, repl, new)
        if ".attn.to_q." in key:
            parts = [sd[key.replace(".to_q.", f".to_{n}.")] for n in "qkv"]
            value = torch.stack([p.reshape(heads, -1, *p.shape[1:]) for p in parts], dim=1)
            value = value.reshape(-1, *parts[0].shape[1:])
            new = new.replace(".to_q.", ".to_qkv.")
        if new.endswith(("ff.w1.weight", "ff.w1.bias")):
            value = torch.cat(value.chunk(2, dim=0)[::-1])
        out[new] = value.clone()
    out["decoder.mask_token"] = torch.zeros(1, 1, sd["decoder.proj_in.weight"].shape[0])
    return out


def load_vae(sd: Mapping[str, torch.Tensor], path: str | None = None) -> AutoencoderKLMiniMaxH3:
    prefix = find_prefix(sd.keys(), MARKER)
    if prefix is None:
        raise ModelLoadError(path, f"not a MiniMax H3 video VAE: no {MARKER}")
    sd = {k: v.to(torch.float32) for k, v in strip_prefix(sd, prefix).items()}
    config = infer_config(sd, path)
    with torch.device("meta"):
        vae = AutoencoderKLMiniMaxH3(**config)
    result = vae.load_state_dict(to_diffusers(sd, config["decoder_num_attention_heads"]), strict=False, assign=True)
    if result.missing_keys or result.unexpected_keys:
        raise ModelLoadError(
            path,
            f"MiniMax H3 video VAE does not match its inferred shape: missing "
            f"{result.missing_keys[:5]}, unexpected {result.unexpected_keys[:5]}",
        )
    # the rope's frequencies are computed, not stored: build them for real (the rest came from the file)
    cfg = vae.config
    vae.decoder.rope = MiniMaxH3VideoRotaryPosEmbed(
        int(cfg.decoder_attention_head_dim * cfg.decoder_rope_dim_ratio), theta=cfg.decoder_rope_theta
    )
    return vae.eval()


def _stats(values: Iterable[float], x: torch.Tensor) -> torch.Tensor:
    return torch.tensor(list(values), dtype=x.dtype, device=x.device)


def encode(vae: AutoencoderKLMiniMaxH3, frames: torch.Tensor) -> torch.Tensor:
    """[T, H, W, 3] frames in [0, 1] (T = 17k+5) -> the normalised latent [1, C, 5k+2, H/16, W/16] (the
    distribution's mean, as ComfyUI takes it). One image goes through `encode_image`."""
    if frames.ndim != 4 or frames.shape[0] % 17 != 5:
        raise ValueError(
            f"the MiniMax H3 video VAE encodes [T, H, W, 3] frames with T = 17k+5 (5, 22, 39, ...), "
            f"got {tuple(frames.shape)}"
        )
    x = frames[..., :3].to(torch.float32).movedim(-1, 0)[None]  # [1, 3, T, H, W]
    mean, std = _stats(IMAGENET_MEAN, x).view(1, 3, 1, 1, 1), _stats(IMAGENET_STD, x).view(1, 3, 1, 1, 1)
    with torch.no_grad():
        z = vae.encode((x - mean) / std).latent_dist.mean
    lm = _stats(vae.config.latents_mean, z).view(1, -1, 1, 1, 1)
    ls = _stats(vae.config.latents_std, z).view(1, -1, 1, 1, 1)
    return (z - lm) / ls


def encode_image(vae: AutoencoderKLMiniMaxH3, image: torch.Tensor) -> torch.Tensor:
    """One [1, H, W, 3] image (a keyframe) -> its normalised latent [1, C, 1, H/16, W/16]: ComfyUI's single-frame
    path, the causal encoder run on the frame alone (no 17-frame clip), its last latent frame kept."""
    if image.ndim != 4 or image.shape[0] != 1:
        raise ValueError(f"encode_image takes one [1, H, W, 3] image, got {tuple(image.shape)}")
    x = image[..., :3].to(torch.float32).movedim(-1, 0)[None]
    mean, std = _stats(IMAGENET_MEAN, x).view(1, 3, 1, 1, 1), _stats(IMAGENET_STD, x).view(1, 3, 1, 1, 1)
    with torch.no_grad():
        moments = vae.quant_conv(vae.encoder((x - mean) / std))[:, :, -1:]
    z = moments[:, : moments.shape[1] // 2]
    lm = _stats(vae.config.latents_mean, z).view(1, -1, 1, 1, 1)
    ls = _stats(vae.config.latents_std, z).view(1, -1, 1, 1, 1)
    return (z - lm) / ls


def decode_image(vae: AutoencoderKLMiniMaxH3, latent: torch.Tensor) -> torch.Tensor:
    """One latent frame [1, C, 1, H', W'] (an image: MiniMax H3 samples EmptyLatentImage's latent as one frame) ->
    [1, H, W, 3] in [0, 1]: ComfyUI's single-frame path, the decoder run on the frame alone, the last of the frames
    it decodes it to kept."""
    z = latent.to(torch.float32)
    lm = _stats(vae.config.latents_mean, z).view(1, -1, 1, 1, 1)
    ls = _stats(vae.config.latents_std, z).view(1, -1, 1, 1, 1)
    with torch.no_grad():
        # diffusers' one-clip decode: spatially tiled as ComfyUI's (256-pixel tiles, 64 overlap; both ship it on)
        x = vae._decode_clip(z * ls + lm)[:, :, -1:]
    mean, std = _stats(IMAGENET_MEAN, x).view(1, 3, 1, 1, 1), _stats(IMAGENET_STD, x).view(1, 3, 1, 1, 1)
    return (x * std + mean).clamp(0.0, 1.0)[0].movedim(0, -1)


def decode(vae: AutoencoderKLMiniMaxH3, latent: torch.Tensor) -> torch.Tensor:
    """A normalised latent [1, C, 5k+2, H', W'] -> [17k+5, H, W, 3] frames in [0, 1]; one latent frame (an image)
    -> one frame (decode_image)."""
    if latent.ndim == 5 and latent.shape[2] == 1:
        return decode_image(vae, latent)
    if latent.ndim != 5 or latent.shape[2] % 5 != 2:
        raise ValueError(
            f"the MiniMax H3 video VAE decodes [1, C, T, H, W] latents with T = 1 or 5k+2 (2, 7, 12, ...), "
            f"got {tuple(latent.shape)}"
        )
    if latent.shape[2] == 2:
        # too short for one decoder chunk: ComfyUI pads one chunk with the last latent and keeps the first 5 frames
        padded = torch.cat([latent, latent[:, :, -1:].expand(-1, -1, 5, -1, -1)], dim=2)
        return decode(vae, padded)[:5]
    z = latent.to(torch.float32)
    lm = _stats(vae.config.latents_mean, z).view(1, -1, 1, 1, 1)
    ls = _stats(vae.config.latents_std, z).view(1, -1, 1, 1, 1)
    with torch.no_grad():
        x = vae.decode(z * ls + lm).sample
    mean, std = _stats(IMAGENET_MEAN, x).view(1, 3, 1, 1, 1), _stats(IMAGENET_STD, x).view(1, 3, 1, 1, 1)
    return (x * std + mean).clamp(0.0, 1.0)[0].movedim(0, -1)
