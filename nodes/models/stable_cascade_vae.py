"""Stable Cascade's stage A: the Paella-style VQGAN that turns stage B's 4-channel latents (1/4 of the image size)
into pixels, in Stability's key layout (`vquantizer.codebook.weight`, `in_block`, `down_blocks`, `up_blocks`,
`out_block`), bare or under `vae.` in the stage B checkpoint (ComfyUI's comfy/sd.py tells it by the codebook).

As ComfyUI uses it: encoding stops before quantisation (the latent is the batch-normed encoder output), decoding
skips the codebook, and the images go in and out in 0..1 without clamping. Sizes come from the shapes: the widths
of its two levels, the number of bottleneck blocks at the inner level, the latent channels.

The stage C checkpoint's `vae.` (the EfficientNet encoder and the previewer) is nodes/models/stable_cascade_coder.py's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from cluster.refs import ModelRef
from nodes.models.components import VAEModel
from nodes.models.errors import ModelLoadError

CODEBOOK = "vquantizer.codebook.weight"
STAGE_C_CODER_MARKERS = (
    "backbone.1.0.block.0.1.num_batches_tracked",
    "blocks.11.num_batches_tracked",
    "encoder.backbone.1.0.block.0.1.num_batches_tracked",
)


class _LayerNormChannels(nn.Module):
    """LayerNorm without affine weights over the channel axis of a [B,C,H,W] map."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.channels = channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 3, 1)
        return nn.functional.layer_norm(x, (self.channels,), eps=1e-6).permute(0, 3, 1, 2)


class MixingBlock(nn.Module):
    """Stage A's residual block: a depthwise 3x3 (replication-padded) and a channel MLP, each after a norm whose
    scale and shift, and the branch's gain, are six learnt scalars (`gammas`)."""

    def __init__(self, channels: int, hidden: int) -> None:
        super().__init__()
        self.norm1 = _LayerNormChannels(channels)
        self.depthwise = nn.Sequential(nn.ReplicationPad2d(1), nn.Conv2d(channels, channels, 3, groups=channels))
        self.norm2 = _LayerNormChannels(channels)
        self.channelwise = nn.Sequential(nn.Linear(channels, hidden), nn.GELU(), nn.Linear(hidden, channels))
        self.gammas = nn.Parameter(torch.zeros(6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = self.gammas
        x = x + self.depthwise(self.norm1(x) * (1 + g[0]) + g[1]) * g[2]
        h = (self.norm2(x) * (1 + g[3]) + g[4]).permute(0, 2, 3, 1)
        return x + self.channelwise(h).permute(0, 3, 1, 2) * g[5]


class StageA(nn.Module):
    """Two levels (widths `widths[0]` outer, `widths[1]` inner), `bottleneck` blocks at the inner level of the
    decoder, `latent` channels, a codebook of `codebook` entries (kept for the file's sake, unused here)."""

    def __init__(self, widths: tuple[int, int], bottleneck: int, latent: int, codebook: int) -> None:
        super().__init__()
        outer, inner = widths
        self.in_block = nn.Sequential(nn.PixelUnshuffle(2), nn.Conv2d(12, outer, 1))
        self.down_blocks = nn.Sequential(
            MixingBlock(outer, outer * 4),
            nn.Conv2d(outer, inner, 4, stride=2, padding=1),
            MixingBlock(inner, inner * 4),
            nn.Sequential(nn.Conv2d(inner, latent, 1, bias=False), nn.BatchNorm2d(latent)),
        )
        self.vquantizer = nn.Module()
        self.vquantizer.codebook = nn.Embedding(codebook, latent)
        self.up_blocks = nn.Sequential(
            nn.Sequential(nn.Conv2d(latent, inner, 1)),
            *[MixingBlock(inner, inner * 4) for _ in range(bottleneck)],
            nn.ConvTranspose2d(inner, outer, 4, stride=2, padding=1),
            MixingBlock(outer, outer * 4),
        )
        self.out_block = nn.Sequential(nn.Conv2d(outer, 12, 1), nn.PixelShuffle(2))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_blocks(self.in_block(x))

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.out_block(self.up_blocks(z))


def stage_a_sizes(sd: Mapping[str, torch.Tensor]) -> dict:
    ups = {int(k.split(".")[1]) for k in sd if k.startswith("up_blocks.")}
    if len({int(k.split(".")[1]) for k in sd if k.startswith("down_blocks.")}) != 4:
        raise ValueError("only stage A with two levels (Stability's) is supported")
    return {
        "widths": (int(sd["in_block.1.weight"].shape[0]), int(sd["down_blocks.1.weight"].shape[0])),
        "bottleneck": len(ups) - 3,  # the latent mapping, the upsampler and the outer block besides them
        "latent": int(sd[CODEBOOK].shape[1]),
        "codebook": int(sd[CODEBOOK].shape[0]),
    }


@dataclass
class StageAVAE(VAEModel):
    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        x = pixels.movedim(-1, 1).to(next(self.module.parameters()).device, torch.float32)
        with torch.no_grad():
            return self.module.encode(x).float()

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        z = latent.to(next(self.module.parameters()).device, torch.float32)
        with torch.no_grad():
            return self.module.decode(z).float().movedim(1, -1)  # unclamped, as ComfyUI's stage A gives it


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> VAEModel:
    """Stage A from a bare file or the stage B checkpoint's `vae.`; the stage C coder from its files or the stage C
    checkpoint's `vae.`."""
    from nodes.models.safetensors_io import build_module

    path = ref.sources[0] if ref.sources else None
    prefix = "vae." if any(k.startswith("vae.") for k in state_dict) else ""
    sd = {k[len(prefix) :]: v.float() for k, v in state_dict.items() if k.startswith(prefix)}
    if any(m in sd for m in STAGE_C_CODER_MARKERS):
        from nodes.models.stable_cascade_coder import load_stage_c_coder

        return load_stage_c_coder(path, sd)
    if CODEBOOK not in sd:
        raise ModelLoadError(path, "holds no Stable Cascade stage A (no vquantizer.codebook.weight)")
    try:
        sizes = stage_a_sizes(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Stable Cascade stage A: {e}") from None
    module = build_module(lambda: StageA(**sizes).requires_grad_(False), sd, path, "Stable Cascade stage A")
    return StageAVAE(arch="stable_cascade_b", module=module.eval(), latent_channels=sizes["latent"], downscale=4)
