"""Genmo Mochi 1 preview's VAE (vae/mochi_vae.safetensors), its decoder: 12-channel latents to RGB, 8x in space and
6x in time ((T - 1) * 6 + 1 frames), as ComfyUI 0.3.64's comfy/ldm/genmo/vae (VideoVAE's Decoder) computes it.

Detection is ComfyUI's comfy/sd.py rule: `decoder.blocks.2.blocks.3.stack.5.weight` (or the decoder alone, unprefixed,
`blocks.2.blocks.3.stack.5.weight`; the encoder's `layers.4.layers.1.attn_block` marks an encoder). ComfyUI builds the
released sizes; here the widths and residual block counts are read from the tensors, the expansions fixed as
Genmo's (space 2x per up block, time from the projection's width: 3, 2, 1 in the released file).

Our own module in Genmo's names: blocks.0 = a 1x1x1 conv and residual blocks; blocks.1.. = up blocks (residual
blocks, a 1x1 projection, depth-to-space-time that drops the first expansion - 1 frames); the last = residual blocks;
then SiLU and a 1x1 projection. Residual blocks: per-frame GroupNorm(32), SiLU, 3x3x3 conv padded causally in time
by repeating the first frame and by edge replication in space, twice, plus the input. ComfyUI's VAEDecode runs it
on the whole latent at once on a CPU (tiling only after running out of memory), and so does `decode` here. The
encoder is not offered (VAEEncode with this VAE is refused).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from cluster.refs import ModelRef
from nodes.models.components import VAEModel
from nodes.models.errors import ModelLoadError
from nodes.models.safetensors_io import build_module

MARKER = "blocks.2.blocks.3.stack.5.weight"
LATENT_CHANNELS = 12
SPATIAL = 8
TEMPORAL = 6


class CausalConv(nn.Conv3d):
    """3x3x3, space padded by replication inside the conv, time by repeating the first frame twice before it."""

    def __init__(self, channels: int):
        super().__init__(channels, channels, 3, padding=(0, 1, 1), padding_mode="replicate")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.pad(x, (0, 0, 0, 0, 2, 0), mode="replicate"))


class FrameNorm(nn.GroupNorm):
    def __init__(self, channels: int):
        super().__init__(32, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, t, h, w = x.shape
        frames = super().forward(x.transpose(1, 2).reshape(b * t, c, h, w))
        return frames.reshape(b, t, c, h, w).transpose(1, 2)


class ResBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.stack = nn.Sequential(
            FrameNorm(channels), nn.SiLU(), CausalConv(channels), FrameNorm(channels), nn.SiLU(), CausalConv(channels)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.stack(x)


class Conv1x1(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.movedim(1, -1)).movedim(-1, 1)


class UpBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, blocks: int, temporal: int):
        super().__init__()
        self.temporal = temporal
        self.blocks = nn.Sequential(*(ResBlock(c_in) for _ in range(blocks)))
        self.proj = Conv1x1(c_in, c_out * temporal * 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.proj(self.blocks(x))
        b, c, t, h, w = x.shape
        st = self.temporal
        x = x.reshape(b, c // (st * 4), st, 2, 2, t, h, w).permute(0, 1, 5, 2, 6, 3, 7, 4)
        x = x.reshape(b, c // (st * 4), t * st, h * 2, w * 2)
        return x[:, :, st - 1 :]  # the causal decoder's first latent frame is one frame, not `st`


class MochiDecoder(nn.Module):
    def __init__(self, widths: list[int], res_blocks: list[int], temporal: list[int]):
        """widths / res_blocks per stage from the latent side: blocks.0, the up blocks, the last stage."""
        super().__init__()
        first = nn.Sequential(
            nn.Conv3d(LATENT_CHANNELS, widths[0], 1), *(ResBlock(widths[0]) for _ in range(res_blocks[0]))
        )
        ups = [UpBlock(widths[i], widths[i + 1], res_blocks[i + 1], temporal[i]) for i in range(len(widths) - 1)]
        last = nn.Sequential(*(ResBlock(widths[-1]) for _ in range(res_blocks[-1])))
        self.blocks = nn.ModuleList([first, *ups, last])
        self.output_proj = Conv1x1(widths[-1], 3)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            z = block(z)
        return self.output_proj(F.silu(z))


def _count(sd: Mapping[str, torch.Tensor], prefix: str) -> int:
    return len({k[len(prefix) :].split(".")[0] for k in sd if k.startswith(prefix) and ".stack." in k})


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict:
    stages = len({k.split(".")[1] for k in sd if k.startswith("blocks.")})
    if stages < 3:
        raise ValueError(f"{stages} decoder stages")
    widths = [int(sd["blocks.0.0.weight"].shape[0])]
    res = [_count(sd, "blocks.0.")]
    temporal = []
    for i in range(1, stages - 1):
        proj = sd[f"blocks.{i}.proj.weight"]
        res.append(_count(sd, f"blocks.{i}.blocks."))
        # the next stage's input: the next up block's projection, or the output projection after the last stage
        after = sd[f"blocks.{i + 1}.proj.weight" if i + 1 < stages - 1 else "output_proj.weight"]
        width = int(after.shape[1])
        if proj.shape[0] % (width * 4):
            raise ValueError(f"up block {i}'s projection {tuple(proj.shape)} does not fit width {width}")
        widths.append(width)
        temporal.append(int(proj.shape[0]) // (width * 4))
    res.append(_count(sd, f"blocks.{stages - 1}."))
    if int(sd["blocks.0.0.weight"].shape[1]) != LATENT_CHANNELS:
        raise ValueError(f"the decoder takes {sd['blocks.0.0.weight'].shape[1]} latent channels, not 12")
    return {"widths": widths, "res_blocks": res, "temporal": temporal}


class MochiVAE(VAEModel):
    """ComfyUI's conventions for it: a latent [B,12,T,h,w] -> IMAGE [B*(6(T-1)+1),8h,8w,3]."""

    temporal_compression = TEMPORAL

    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("the Mochi VAE's encoder is not supported yet (only decoding)")

    encode_video = encode

    @staticmethod
    def decoded_size(dim: int, size: int) -> int:
        """Frames (dim 0) or pixels (1, 2) a latent extent decodes to: 6(T-1)+1 in time, x8 in space."""
        return max(0, size * TEMPORAL - (TEMPORAL - 1)) if dim == 0 else size * SPATIAL

    @staticmethod
    def decoded_position(dim: int, index: int) -> int:
        return index * (TEMPORAL if dim == 0 else SPATIAL)

    @torch.no_grad()
    def decode_raw(self, latent: torch.Tensor) -> torch.Tensor:
        """[B,12,T,h,w] -> the decoder's output [B,3,6(T-1)+1,8h,8w] in -1..1, before the clamp."""
        if latent.dim() != 5 or latent.shape[1] != LATENT_CHANNELS:
            raise ValueError(f"the Mochi VAE takes [B,12,T,H,W] video latents, got {tuple(latent.shape)}")
        return torch.cat([self.module(latent[i : i + 1].float()) for i in range(latent.shape[0])])

    @staticmethod
    def to_image(x: torch.Tensor) -> torch.Tensor:
        image = ((x + 1.0) / 2.0).clamp(0.0, 1.0).movedim(1, -1)
        return image.reshape(-1, *image.shape[2:])

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        return self.to_image(self.decode_raw(latent))


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> MochiVAE:
    """The Mochi VAE's decoder of a file (with or without its encoder), computed in float32 as ComfyUI's on a CPU."""
    path = ref.sources[0] if ref.sources else None
    if MARKER in state_dict:
        sd = dict(state_dict)
    elif "decoder." + MARKER in state_dict:
        sd = {k[len("decoder.") :]: v for k, v in state_dict.items() if k.startswith("decoder.")}
    else:
        raise ModelLoadError(path, "a Mochi VAE without its decoder (an encoder alone) is not supported")
    try:
        config = infer_config(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Mochi VAE: {e}") from None
    module = build_module(lambda: MochiDecoder(**config), sd, path, "Mochi VAE", dtype=torch.float32)
    return MochiVAE(arch="mochi", module=module, latent_channels=LATENT_CHANNELS, downscale=SPATIAL)
