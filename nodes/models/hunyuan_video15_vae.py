"""The HunyuanVideo 1.5 VAE (vae/hunyuanvideo15_vae_fp16.safetensors): a causal 3-D KL autoencoder, 32 latent
channels at 1/16 of the frame and 1/4 of the frames (the first frame alone), RMS norms and pixel-(un)shuffle
resamplers with averaged shortcuts. The file is in the authors' names (`encoder.down.N.block.M.conv1.conv`,
`encoder.down.N.downsample.conv.conv`, `decoder.up.N.upsample.conv.conv`, `mid.block_1` / `attn_1` / `block_2`,
RMS `gamma`s), which ComfyUI 0.10.0's comfy/sd.py tells by `decoder.conv_in.conv.weight` taking 32 channels; the
renames to diffusers' AutoencoderKLHunyuanVideo15 follow diffusers' own conversion script for the authors' file
(scripts/convert_hunyuan_video1_5_to_diffusers.py).

ComfyUI's conventions around the network (comfy/ldm/hunyuan_video/vae_refiner.py, comfy/sd.py): pixels 0..1 as
2x-1, a batch of images taken as the frames of one video (frames past the last 1+4k dropped), the posterior's
mean, decoded frames clamped (x+1)/2; its middle attention sees every frame (diffusers' masks later frames off),
so the attention blocks here attend without a mask.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch

from cluster.refs import ModelRef
from nodes.models.components import VAEModel
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.safetensors_io import build_module

MARKER = "decoder.conv_in.conv.weight"
LATENT_CHANNELS = 32
DOWNSCALE = 16
TEMPORAL = 4
_STAGE = re.compile(r"^(encoder|decoder)\.(down|up)\.(\d+)\.(block\.(\d+)|downsample|upsample)\.(.*)$")
_MID = {
    "mid.block_1.": "mid_block.resnets.0.",
    "mid.attn_1.": "mid_block.attentions.0.",
    "mid.block_2.": "mid_block.resnets.1.",
}
_ATTN = {"q.": "to_q.", "k.": "to_k.", "v.": "to_v."}


def is_hunyuan_video15_vae(shapes: Mapping[str, tuple[int, ...]], prefix: str = "") -> bool:
    """ComfyUI 0.10.0's test: a wrapped (causal) 3-D decoder input convolution taking 32 latent channels."""
    shape = shapes.get(prefix + MARKER)
    return shape is not None and len(shape) == 5 and shape[1] == LATENT_CHANNELS


def to_diffusers_layout(state_dict: Mapping[str, torch.Tensor], path: str | None = None) -> dict[str, torch.Tensor]:
    """AutoencoderKLHunyuanVideo15's names from the authors' (bare, `vae.` or `first_stage_model.`)."""
    prefix = find_prefix(state_dict.keys(), MARKER)
    if prefix is None:
        raise ModelLoadError(path, f"not a HunyuanVideo 1.5 VAE (no {MARKER})")
    sd = strip_prefix(state_dict, prefix)
    out = {}
    for key, value in sd.items():
        m = _STAGE.match(key)
        if m is not None:
            part, stage, i, where, j, rest = m.groups()
            if j is not None:
                new = f"{part}.{stage}_blocks.{i}.resnets.{j}.{rest}"
            else:
                new = f"{part}.{stage}_blocks.{i}.{stage}samplers.0.{rest}"
        else:
            new = key
            for old, mid in _MID.items():
                if f".{old}" in key:
                    head, tail = key.split(f".{old}", 1)
                    if old == "mid.attn_1.":
                        tail = next((b + tail[len(a) :] for a, b in _ATTN.items() if tail.startswith(a)), tail)
                    new = f"{head}.{mid}{tail}"
        out[new.replace(".nin_shortcut.", ".conv_shortcut.")] = value
    return out


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict:
    """AutoencoderKLHunyuanVideo15's config from a diffusers-layout state dict: stage widths (each stage's first
    resnet's output), resnets per encoder stage; the 16x / 4x compression fixed as ComfyUI fixes it."""
    stages = sorted({int(k.split(".")[2]) for k in sd if re.match(r"encoder\.down_blocks\.\d+\.resnets\.0\.conv1", k)})
    if not stages:
        raise ValueError("the encoder has no stages")
    widths = tuple(int(sd[f"encoder.down_blocks.{i}.resnets.0.conv1.conv.weight"].shape[0]) for i in stages)
    per_stage = len({k.split(".")[4] for k in sd if k.startswith("encoder.down_blocks.0.resnets.")})
    latent = int(sd[MARKER].shape[1])
    if latent != LATENT_CHANNELS:
        raise ValueError(f"the decoder takes {latent} latent channels, expected {LATENT_CHANNELS}")
    return {
        "in_channels": int(sd["encoder.conv_in.conv.weight"].shape[1]),
        "out_channels": int(sd["decoder.conv_out.conv.weight"].shape[0]),
        "latent_channels": latent,
        "block_out_channels": widths,
        "layers_per_block": per_stage,
        "spatial_compression_ratio": DOWNSCALE,
        "temporal_compression_ratio": TEMPORAL,
    }


class UnmaskedVideoAttention(torch.nn.Module):
    """The middle attention block attending over every frame at once, as ComfyUI's does (same weights as
    diffusers' HunyuanVideo15AttnBlock, whose causal frame mask ComfyUI does not apply)."""

    def __init__(self, block: torch.nn.Module):
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = self.block
        h = b.norm(x)
        q, k, v = b.to_q(h), b.to_k(h), b.to_v(h)
        n, c, t, hh, ww = q.shape
        q, k, v = (u.reshape(n, 1, c, t * hh * ww).transpose(2, 3) for u in (q, k, v))
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return x + b.proj_out(out.transpose(2, 3).reshape(n, c, t, hh, ww))


class HunyuanVideo15VAE(VAEModel):
    """ComfyUI's HunyuanVideo 1.5 VAE conventions: IMAGE [T,H,W,3] is one video -> [1,32,1+(T-1)//4,H/16,W/16];
    a latent [B,32,T,h,w] -> IMAGE [B*(4T-3),H,W,3]."""

    @torch.no_grad()
    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        h, w = pixels.shape[1], pixels.shape[2]
        if h % DOWNSCALE or w % DOWNSCALE:
            raise ValueError(f"the HunyuanVideo 1.5 VAE needs sides divisible by {DOWNSCALE}, got {w}x{h}")
        frames = 1 + (pixels.shape[0] - 1) // TEMPORAL * TEMPORAL
        x = pixels[:frames, ..., :3].movedim(-1, 0)[None].to(self.module.dtype) * 2.0 - 1.0
        return self.module.encode(x).latent_dist.mode().float()

    encode_video = encode

    @torch.no_grad()
    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        if latent.dim() != 5 or latent.shape[1] != self.latent_channels:
            raise ValueError(
                f"this VAE takes [B,{self.latent_channels},T,H,W] video latents, got {tuple(latent.shape)}"
            )
        x = self.module.decode(latent.to(self.module.dtype)).sample.float()
        image = ((x + 1.0) / 2.0).clamp(0.0, 1.0).movedim(1, -1)  # [B,T,H,W,C]
        return image.reshape(-1, *image.shape[2:])


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> HunyuanVideo15VAE:
    """The HunyuanVideo 1.5 VAE of a file, computed in float32 (as ComfyUI's VAE runs on a CPU)."""
    from diffusers import AutoencoderKLHunyuanVideo15

    path = ref.sources[0] if ref.sources else None
    sd = to_diffusers_layout(state_dict, path)
    try:
        config = infer_config(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable HunyuanVideo 1.5 VAE: {e}") from None
    module = build_module(
        lambda: AutoencoderKLHunyuanVideo15(**config), sd, path, "HunyuanVideo 1.5 VAE", dtype=torch.float32
    )
    for part in (module.encoder, module.decoder):
        part.mid_block.attentions[0] = UnmaskedVideoAttention(part.mid_block.attentions[0])
    return HunyuanVideo15VAE(
        arch="hunyuan_video15", module=module, latent_channels=LATENT_CHANNELS, downscale=DOWNSCALE
    )
