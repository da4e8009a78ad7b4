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
on the whole latent at once on a CPU (tiling only after running out of memory), and so does `decode` here.

The encoder (VAEEncode; ComfyUI 0.3.64's VideoVAE has one, a decoder-only file cannot encode): two Fourier feature
octaves (2^6, 2^7 x 2 pi) joined to the -1..1 pixels, a 1x1 projection, residual blocks (with temporal self-attention
blocks where the file has them: per pixel across frames, L2-normalised queries and keys in 32-wide heads, a single
frame taking the value path alone), causal strided downsampling convs (time 1, 2, 3 and space 2 in the released
file, read from the kernels), a GroupNorm, SiLU and a 1x1 projection to 12 means and 12 log-variances; the latent is
the means (the posterior's mode). Its layout is read from the tensors.
"""

from __future__ import annotations

import math
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


class MochiCausalConv(nn.Conv3d):
    """Space padded by replication inside the conv (3x3x3: by one), time by repeating the first frame kernel - 1
    times before it (Genmo's causal PConv3d)."""

    def __init__(self, c_in: int, c_out: int | None = None, kernel: tuple[int, int, int] = (3, 3, 3), stride=1):
        pad = ((kernel[1] - 1) // 2, (kernel[2] - 1) // 2)
        super().__init__(c_in, c_out or c_in, kernel, stride=stride, padding=(0, *pad), padding_mode="replicate")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.pad(x, (0, 0, 0, 0, self.kernel_size[0] - 1, 0), mode="replicate"))


class StridedCausalConv(MochiCausalConv):
    """The encoder's downsampling: kernel = stride, no spatial padding."""

    def __init__(self, c_in: int, c_out: int, t: int, s: int):
        super().__init__(c_in, c_out, (t, s, s), stride=(t, s, s))


class FrameNorm(nn.GroupNorm):
    def __init__(self, channels: int):
        super().__init__(32, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, t, h, w = x.shape
        frames = super().forward(x.transpose(1, 2).reshape(b * t, c, h, w))
        return frames.reshape(b, t, c, h, w).transpose(1, 2)


class TemporalAttention(nn.Module):
    HEAD = 32

    def __init__(self, dim: int):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, t, h, w = x.shape
        if t == 1:  # one frame attends to itself alone: its value, projected
            return self.out(self.qkv(x.movedim(1, -1)).chunk(3, dim=-1)[2]).movedim(-1, 1)
        seq = x.permute(0, 3, 4, 2, 1).reshape(b * h * w, t, c)
        qkv = self.qkv(seq).view(b * h * w, t, 3, c // self.HEAD, self.HEAD).transpose(1, 3)
        q, k, v = qkv.unbind(2)
        q, k = F.normalize(q, p=2, dim=-1), F.normalize(k, p=2, dim=-1)
        out = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b * h * w, t, c)
        return self.out(out).reshape(b, h, w, t, c).permute(0, 4, 3, 1, 2)


class AttentionBlock(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = FrameNorm(dim)
        self.attn = TemporalAttention(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.attn(self.norm(x))


class MochiResBlock(nn.Module):
    def __init__(self, channels: int, attention: bool = False):
        super().__init__()
        self.stack = nn.Sequential(
            FrameNorm(channels),
            nn.SiLU(),
            MochiCausalConv(channels),
            FrameNorm(channels),
            nn.SiLU(),
            MochiCausalConv(channels),
        )
        self.attn_block = AttentionBlock(channels) if attention else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.stack(x)
        return x if self.attn_block is None else self.attn_block(x)


class Conv1x1(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.movedim(1, -1)).movedim(-1, 1)


class UpBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, blocks: int, temporal: int):
        super().__init__()
        self.temporal = temporal
        self.blocks = nn.Sequential(*(MochiResBlock(c_in) for _ in range(blocks)))
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
            nn.Conv3d(LATENT_CHANNELS, widths[0], 1), *(MochiResBlock(widths[0]) for _ in range(res_blocks[0]))
        )
        ups = [UpBlock(widths[i], widths[i + 1], res_blocks[i + 1], temporal[i]) for i in range(len(widths) - 1)]
        last = nn.Sequential(*(MochiResBlock(widths[-1]) for _ in range(res_blocks[-1])))
        self.blocks = nn.ModuleList([first, *ups, last])
        self.output_proj = Conv1x1(widths[-1], 3)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            z = block(z)
        return self.output_proj(F.silu(z))


class DownBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, t: int, s: int, attention: list[bool]):
        super().__init__()
        self.layers = nn.Sequential(StridedCausalConv(c_in, c_out, t, s), *(MochiResBlock(c_out, a) for a in attention))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def fourier_features(x: torch.Tensor, octaves: tuple[int, ...] = (6, 7)) -> torch.Tensor:
    """[B,C,...] -> [B,C(1+2n),...]: x, then sin and cos of x at 2^o * 2 pi, channel by channel, octave by octave."""
    w = torch.tensor([2.0**o * 2 * math.pi for o in octaves], dtype=x.dtype, device=x.device).repeat(x.shape[1])
    h = x.repeat_interleave(len(octaves), dim=1) * w.view(1, -1, *([1] * (x.dim() - 2)))
    return torch.cat([x, torch.sin(h), torch.cos(h)], dim=1)


class MochiEncoder(nn.Module):
    def __init__(self, layers: list[tuple]):
        """layers: ("in", c_in, c_out) | ("res", channels, attention) | ("down", c_in, c_out, t, s, [attention])."""
        super().__init__()
        built: list[nn.Module] = []
        for kind, *args in layers:
            built.append(
                Conv1x1(*args) if kind == "in" else MochiResBlock(*args) if kind == "res" else DownBlock(*args)
            )
        self.layers = nn.Sequential(*built)
        width = layers[-1][2] if layers[-1][0] == "down" else layers[-1][1]
        self.output_norm = FrameNorm(width)
        self.output_proj = Conv1x1(width, 2 * LATENT_CHANNELS, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(fourier_features(x))
        return self.output_proj(F.silu(self.output_norm(x)))[:, :LATENT_CHANNELS]


def encoder_layers(sd: Mapping[str, torch.Tensor]) -> list[tuple]:
    """The encoder's layer list (MochiEncoder's) from its tensors, unprefixed."""
    count = len({k.split(".")[1] for k in sd if k.startswith("layers.")})
    first = sd["layers.0.weight"]
    layers: list[tuple] = [("in", int(first.shape[1]), int(first.shape[0]))]
    for i in range(1, count):
        p = f"layers.{i}."
        if p + "layers.0.weight" in sd:
            kernel = sd[p + "layers.0.weight"]
            blocks = len({k.split(".")[3] for k in sd if k.startswith(p + "layers.") and ".stack." in k})
            attention = [f"{p}layers.{j + 1}.attn_block.attn.qkv.weight" in sd for j in range(blocks)]
            layers.append(("down", int(kernel.shape[1]), int(kernel.shape[0]), *map(int, kernel.shape[2:4]), attention))
        else:
            layers.append(("res", int(sd[p + "stack.0.weight"].shape[0]), p + "attn_block.attn.qkv.weight" in sd))
    if int(first.shape[1]) != 15:
        raise ValueError(f"the encoder takes {first.shape[1]} channels, not RGB and its 12 Fourier features")
    return layers


class MochiAutoencoder(nn.Module):
    def __init__(self, decoder: dict, encoder: list[tuple] | None):
        super().__init__()
        self.decoder = MochiDecoder(**decoder)
        self.encoder = None if encoder is None else MochiEncoder(encoder)


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

    @torch.no_grad()
    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        """IMAGE [T,H,W,3] (one video) -> the means [1,12,1+(T-1)//6,H/8,W/8], the sides centre-cropped to 8."""
        encoder = self.module.encoder
        if encoder is None:
            raise ValueError("this Mochi VAE file has no encoder (a decoder-only file): it can only decode")
        h, w = pixels.shape[1] // SPATIAL * SPATIAL, pixels.shape[2] // SPATIAL * SPATIAL
        if h == 0 or w == 0:
            raise ValueError(f"the Mochi VAE needs sides of at least {SPATIAL}, got {tuple(pixels.shape)}")
        top, left = (pixels.shape[1] % SPATIAL) // 2, (pixels.shape[2] % SPATIAL) // 2
        pixels = pixels[:, top : top + h, left : left + w, :3]
        return encoder(pixels.movedim(-1, 0)[None].to(torch.float32) * 2.0 - 1.0).float()

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
        return torch.cat([self.module.decoder(latent[i : i + 1].float()) for i in range(latent.shape[0])])

    @staticmethod
    def to_image(x: torch.Tensor) -> torch.Tensor:
        image = ((x + 1.0) / 2.0).clamp(0.0, 1.0).movedim(1, -1)
        return image.reshape(-1, *image.shape[2:])

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        return self.to_image(self.decode_raw(latent))


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> MochiVAE:
    """The Mochi VAE of a file (its decoder, and its encoder where the file has one), computed in float32 as ComfyUI's
    on a CPU. A bare decoder's keys are unprefixed (ComfyUI puts them under `decoder.`)."""
    path = ref.sources[0] if ref.sources else None
    if MARKER in state_dict:
        state_dict = {"decoder." + k: v for k, v in state_dict.items()}
    if "decoder." + MARKER not in state_dict:
        raise ModelLoadError(path, "a Mochi VAE without its decoder (an encoder alone) is not supported")
    sd = {k: v for k, v in state_dict.items() if k.startswith(("decoder.", "encoder."))}
    part = {p: {k[len(p) :]: v for k, v in sd.items() if k.startswith(p)} for p in ("decoder.", "encoder.")}
    try:
        config = {
            "decoder": infer_config(part["decoder."]),
            "encoder": encoder_layers(part["encoder."]) if part["encoder."] else None,
        }
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Mochi VAE: {e}") from None
    module = build_module(lambda: MochiAutoencoder(**config), sd, path, "Mochi VAE", dtype=torch.float32)
    return MochiVAE(arch="mochi", module=module, latent_channels=LATENT_CHANNELS, downscale=SPATIAL)
