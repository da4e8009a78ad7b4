"""MiniMax H3's audio VAE from the single file ComfyUI users download (Comfy-Org/MiniMax-H3's
vae/minimax_h3_audio_vae_fp32.safetensors): a DAC-style waveform encoder, an attention projection to 32 latent
channels and a BigVGAN decoder, mono at 32 kHz with 800 samples per latent (40 latents a second).

The published file is ComfyUI's layout (comfy/ldm/minimax/audio_vae.py, read for its key names only): the module
names of diffusers 0.42's AutoencoderKLMiniMaxH3Audio, but every weight-normalised convolution folded into one
plain `weight`, and the per-channel latent statistics stored as the tensors `latents_mean` / `latents_std`
(diffusers keeps them in its config). Loading builds diffusers' model, drops its weight-norm reparametrisation
and copies the folded weights in unchanged.

Latents are ComfyUI's [B, 32, 2, T] (two stereo channels, each decoded alone by the mono decoder), normalised
with those statistics; decoding gives [B, 2, T * 800] clamped to [-1, 1]."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from nodes.models.errors import ModelLoadError

MARKERS = ("pre_block.attn.q_bias", "dec_in_proj.weight", "decoder.conv_pre.weight")
STATS = ("latents_mean", "latents_std")
SAMPLE_RATE = 32000
HEADS = 8  # ComfyUI builds the projection with 8 heads whatever the widths; the file cannot say otherwise
ARCH = "minimax_h3_audio"


def is_minimax_h3_audio_vae(keys: Any) -> bool:
    keys = set(keys)
    return all(k in keys for k in MARKERS)


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """diffusers' constructor arguments from the file's tensor shapes (rates from the kernel sizes)."""
    enc = sorted(int(k.split(".")[2]) for k in sd if k.startswith("encoder.block.") and k.endswith(".block.4.weight"))
    ups = sorted({int(k.split(".")[2]) for k in sd if k.startswith("decoder.ups.") and k.endswith(".weight")})
    resblocks = len({k.split(".")[2] for k in sd if k.startswith("decoder.resblocks.")})
    if not enc or not ups or resblocks % len(ups):
        raise ValueError("the encoder blocks or decoder stages of the MiniMax H3 audio VAE are missing")
    per_stage = resblocks // len(ups)
    kernels = [int(sd[f"decoder.ups.{i}.0.weight"].shape[-1]) for i in ups]
    return {
        "encoder_dim": int(sd["encoder.block.0.weight"].shape[0]),
        "encoder_rates": tuple(int(sd[f"encoder.block.{i}.block.4.weight"].shape[-1]) // 2 for i in enc),
        "latent_dim": int(sd["dec_in_proj.weight"].shape[0]),
        "latent_channels": int(sd["mean_proj.weight"].shape[0]),
        "num_attention_heads": HEADS,
        "decoder_dim": int(sd["decoder.conv_pre.weight"].shape[0]),
        # BigVGAN's transposed convolutions use kernel 2u (even) or 2u-1 (odd u), padding (k-u)//2
        "decoder_rates": tuple((k + 1) // 2 for k in kernels),
        "decoder_kernel_sizes": tuple(kernels),
        "resblock_kernel_sizes": tuple(
            int(sd[f"decoder.resblocks.{j}.convs1.0.weight"].shape[-1]) for j in range(per_stage)
        ),
        "resblock_dilation_sizes": tuple(tuple(int(d) for d in _dilations(sd, j)) for j in range(per_stage)),
        "latents_mean": [float(v) for v in sd["latents_mean"].float()],
        "latents_std": [float(v) for v in sd["latents_std"].float()],
    }


def _dilations(sd: Mapping[str, torch.Tensor], block: int) -> tuple[int, ...]:
    # the file has no dilations; BigVGAN's AMP blocks use (1, 3, 5) for as many convolutions as it holds
    n = len({k.split(".")[4] for k in sd if k.startswith(f"decoder.resblocks.{block}.convs1.")})
    if n != 3:
        raise ValueError(f"decoder.resblocks.{block} has {n} dilated convolutions; MiniMax H3's have 3 (1, 3, 5)")
    return (1, 3, 5)


def _drop_weight_norm(module: torch.nn.Module) -> None:
    from torch.nn.utils import remove_weight_norm

    for sub in module.modules():
        if hasattr(sub, "weight_g"):
            remove_weight_norm(sub)


def load_audio_vae(sd: Mapping[str, torch.Tensor], path: str | None = None) -> torch.nn.Module:
    """diffusers' AutoencoderKLMiniMaxH3Audio holding the file's folded weights, float32, eval mode."""
    import warnings

    from diffusers import AutoencoderKLMiniMaxH3Audio

    missing = [k for k in MARKERS + STATS if k not in sd]
    if missing:
        raise ModelLoadError(path, f"is not a MiniMax H3 audio VAE file (lacks {', '.join(missing)})")
    try:
        config = infer_config(sd)
    except (KeyError, ValueError) as exc:
        raise ModelLoadError(path, f"MiniMax H3 audio VAE: {exc}") from exc
    with warnings.catch_warnings():  # diffusers builds the convolutions with the deprecated weight_norm helper
        warnings.simplefilter("ignore", FutureWarning)
        model = AutoencoderKLMiniMaxH3Audio(**config)
    _drop_weight_norm(model)
    own = model.state_dict()
    weights = {k: v.float() for k, v in sd.items() if k not in STATS}
    # the resampling filters are fixed functions of the widths; a file may omit them
    for k in own:
        if k.endswith(".filter") and k not in weights:
            weights[k] = own[k]
    unexpected = sorted(set(weights) - set(own))
    absent = sorted(set(own) - set(weights))
    if unexpected or absent:
        raise ModelLoadError(
            path,
            f"MiniMax H3 audio VAE: tensors the model lacks {unexpected[:3]}, tensors the file lacks {absent[:3]}",
        )
    for k, v in weights.items():
        if tuple(v.shape) != tuple(own[k].shape):
            raise ModelLoadError(path, f"MiniMax H3 audio VAE: {k} is {tuple(v.shape)}, expected {tuple(own[k].shape)}")
    model.load_state_dict(weights, strict=True)
    return model.float().eval()


@torch.no_grad()
def decode(model: torch.nn.Module, latent: torch.Tensor) -> torch.Tensor:
    """Normalised latents [B, C, 2, T] -> stereo waveforms [B, 2, T * hop] in [-1, 1]."""
    channels = int(model.config.latent_channels)
    if latent.ndim != 4 or latent.shape[1] != channels:
        raise ValueError(
            f"the MiniMax H3 audio VAE decodes [batch, {channels}, stereo channels, frames] latents, "
            f"got {tuple(latent.shape)}"
        )
    b, c, s, t = latent.shape
    z = latent.float().permute(0, 2, 1, 3).reshape(b * s, c, t)
    mean = torch.tensor(model.config.latents_mean, dtype=torch.float32).view(1, -1, 1)
    std = torch.tensor(model.config.latents_std, dtype=torch.float32).view(1, -1, 1)
    wave = model.decode(z * std + mean, return_dict=False)[0]
    return wave.reshape(b, s, -1)


def to_published(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The ComfyUI-layout file of a diffusers model: each weight norm folded into the weight its forward uses
    (torch._weight_norm, the op of torch.nn.utils.weight_norm), the latent statistics as tensors."""
    sd: dict[str, torch.Tensor] = {}
    own = model.state_dict()
    for k, v in own.items():
        if k.endswith(".weight_g"):
            continue
        if k.endswith(".weight_v"):
            base = k.removesuffix("_v")
            sd[base] = torch._weight_norm(v, own[base + "_g"], 0).detach().clone().contiguous()
        else:
            sd[k] = v.detach().clone().contiguous()
    sd["latents_mean"] = torch.tensor(model.config.latents_mean, dtype=torch.float32)
    sd["latents_std"] = torch.tensor(model.config.latents_std, dtype=torch.float32)
    return sd


def load_vae(ref: Any, state_dict: Mapping[str, torch.Tensor]) -> Any:
    """VAELoader's VAE on this file serves VAE Decode Audio only; the image/video VAE nodes refuse it by name."""
    raise ModelLoadError(
        ref.sources[0] if ref.sources else None,
        "is MiniMax H3's audio VAE: decode its latents with VAE Decode Audio (VAEDecodeAudio), not as images",
    )
