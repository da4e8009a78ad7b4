"""The HunyuanVideo 1.0 VAE (vae/hunyuan_video_vae_bf16.safetensors, which Kandinsky 5's video templates load): a
causal 3-D KL autoencoder, 16 latent channels at 1/8 of the frame and 1/4 of the frames (the first frame alone).

The published file is in the LDM names ComfyUI loads (`encoder.down.N.block.M.conv1.conv`, `.downsample.conv.conv`,
`decoder.up.N.upsample.conv.conv`, `mid.block_1` / `attn_1` / `block_2`, `quant_conv`, `post_quant_conv`); ComfyUI
0.10.0's comfy/sd.py tells it by a causal `decoder.conv_in.conv.weight` taking other than 32 channels (32: HunyuanVideo
1.5's) and builds its AutoencoderKL with conv3d and a time compression of 4: the levels' widths, block counts and
latent width are read from the tensors here (ComfyUI fixes 128 x (1, 2, 4, 4), 2 blocks).

The module is our own, under those names, because ComfyUI's computation is not diffusers' AutoencoderKLHunyuanVideo's:
its middle attention attends over every frame without a mask (diffusers masks later frames off), and it runs the
resolution levels chunk by chunk in time (the encoder: the first frame, then 8 frames at a time; the decoder: 2 latent
frames at a time), each causal convolution taking the last two (padded) input frames of the chunk before as its
history, so every group norm of the levels normalises over one chunk's frames, not the whole video. The middle blocks
and the encoder's output layers see the whole video. Causal convolutions pad by replication (two frames before the
first chunk, one pixel around). Pixels are 0..1 as 2x-1, sides centre-cropped to multiples of 8, a batch of images
encoded as the frames of one video (frames past the last 1+4k dropped), the posterior's mean; decoded frames clamped
(x+1)/2.
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
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.safetensors_io import build_module

MARKER = "decoder.conv_in.conv.weight"
DOWNSCALE = 8
TEMPORAL = 4
ENCODE_CHUNK = 2 * TEMPORAL  # frames per encoder chunk after the first frame (ComfyUI's Encoder.forward)
DECODE_CHUNK = 2  # latent frames per decoder chunk
GROUPS = 32
EPS = 1e-6

Carry = list[torch.Tensor]


class CausalConv(nn.Module):
    """A 3-D convolution under `.conv` (the published names) that pads causally: replicated frames before the first
    chunk, the chunk before's last two padded frames after it (`carry_in`); pushes its own last two to `carry_out`."""

    def __init__(self, c_in: int, c_out: int, kernel: int = 3, stride: int | tuple[int, int, int] = 1) -> None:
        super().__init__()
        self.conv = nn.Conv3d(c_in, c_out, kernel, stride=stride)

    def forward(self, x: torch.Tensor, carry_in: Carry | None = None, carry_out: Carry | None = None) -> torch.Tensor:
        if self.conv.kernel_size[0] == 1:
            return self.conv(x)
        if carry_in is None:
            x = F.pad(x, (1, 1, 1, 1, 2, 0), mode="replicate")
        else:
            history = carry_in.pop(0)
            x = torch.cat([history, F.pad(x, (1, 1, 1, 1, 2 - history.shape[2], 0), mode="replicate")], dim=2)
        if carry_out is not None:
            carry_out.append(x[:, :, -2:].clone())
        return self.conv(x)


def _norm(channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(GROUPS, channels, eps=EPS, affine=True)


class HunyuanVAEResnetBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.norm1 = _norm(c_in)
        self.conv1 = CausalConv(c_in, c_out)
        self.norm2 = _norm(c_out)
        self.conv2 = CausalConv(c_out, c_out)
        if c_in != c_out:
            self.nin_shortcut = CausalConv(c_in, c_out, kernel=1)

    def forward(self, x: torch.Tensor, carry_in: Carry | None = None, carry_out: Carry | None = None) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)), carry_in, carry_out)
        h = self.conv2(F.silu(self.norm2(h)), carry_in, carry_out)
        return (self.nin_shortcut(x) if hasattr(self, "nin_shortcut") else x) + h


class AttnBlock(nn.Module):
    """Single-head attention over every position of the video (1x1x1 convolutions q, k, v, proj_out), no mask."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = _norm(channels)
        self.q, self.k, self.v, self.proj_out = (nn.Conv3d(channels, channels, 1) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        b, c = x.shape[:2]
        q, k, v = (m(h).reshape(b, 1, c, -1).transpose(2, 3) for m in (self.q, self.k, self.v))
        out = F.scaled_dot_product_attention(q, k, v)
        return x + self.proj_out(out.transpose(2, 3).reshape(x.shape))


class Resample(nn.Module):
    """A level's down- or upsampler: `.conv` is the causal convolution (strided down; after nearest upsampling up)."""

    def __init__(self, channels: int, stride=1) -> None:
        super().__init__()
        self.conv = CausalConv(channels, channels, stride=stride)


class Level(nn.Module):
    """One resolution level: its blocks, then its downsampler (encoder) or upsampler (decoder). Called as a module,
    so that the weight cache's per-block hooks (cluster.weights: the largest ModuleList's entries) see every use."""

    def __init__(self, blocks: list[HunyuanVAEResnetBlock]) -> None:
        super().__init__()
        self.block = nn.ModuleList(blocks)
        self.attn = nn.ModuleList()

    def forward(self, h: torch.Tensor, carry_in: Carry | None, carry_out: Carry | None) -> torch.Tensor:
        for block in self.block:
            h = block(h, carry_in, carry_out)
        if hasattr(self, "downsample"):
            h = self.downsample.conv(h, carry_in, carry_out)
        if hasattr(self, "upsample"):
            h = upsample_nearest(h, self.time, first_chunk=carry_in is None)
            h = self.upsample.conv(h, carry_in, carry_out)
        return h


def upsample_nearest(h: torch.Tensor, time: bool, first_chunk: bool) -> torch.Tensor:
    """Nearest x2 in space, and in time where `time` (the video's first frame, in the first chunk, stays one frame)."""
    if not time:
        return F.interpolate(h, scale_factor=(1.0, 2.0, 2.0), mode="nearest")
    parts = []
    if first_chunk:
        parts.append(F.interpolate(h[:, :, 0], scale_factor=(2.0, 2.0), mode="nearest")[:, :, None])
        h = h[:, :, 1:]
    if h.shape[2] > 0:
        parts.append(F.interpolate(h, scale_factor=(2.0, 2.0, 2.0), mode="nearest"))
    return torch.cat(parts, dim=2) if len(parts) > 1 else parts[0]


class Mid(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.block_1 = HunyuanVAEResnetBlock(channels, channels)
        self.attn_1 = AttnBlock(channels)
        self.block_2 = HunyuanVAEResnetBlock(channels, channels)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.block_2(self.attn_1(self.block_1(h)))


TIME_LEVELS = int(math.log2(TEMPORAL))  # how many of the deepest resampling levels resample time too


class HunyuanVAEEncoder(nn.Module):
    def __init__(self, ch: int, mult: tuple[int, ...], blocks: int, z_channels: int) -> None:
        super().__init__()
        self.conv_in = CausalConv(3, ch)
        self.down = nn.ModuleList()
        c_in = ch
        for i, m in enumerate(mult):
            level = Level([HunyuanVAEResnetBlock(c_in if j == 0 else ch * m, ch * m) for j in range(blocks)])
            c_in = ch * m
            if i != len(mult) - 1:  # the shallowest levels halve the frame only, the rest time too
                spatial_only = len(mult) - 1 - i > TIME_LEVELS
                level.downsample = Resample(c_in, stride=(1, 2, 2) if spatial_only else 2)
            self.down.append(level)
        self.mid = Mid(c_in)
        self.norm_out = _norm(c_in)
        self.conv_out = CausalConv(c_in, 2 * z_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        chunks = [x[:, :, :1]]
        if x.shape[2] > TEMPORAL:
            chunks += list(torch.split(x[:, :, 1 : 1 + (x.shape[2] - 1) // TEMPORAL * TEMPORAL], ENCODE_CHUNK, dim=2))
        out, carry_in = [], None
        for i, h in enumerate(chunks):
            carry_out = None if i == len(chunks) - 1 else []
            h = self.conv_in(h, carry_in, carry_out)
            for level in self.down:
                h = level(h, carry_in, carry_out)
            out.append(h)
            carry_in = carry_out
        h = self.mid(torch.cat(out, dim=2))
        return self.conv_out(F.silu(self.norm_out(h)))


class HunyuanVAEDecoder(nn.Module):
    def __init__(self, ch: int, mult: tuple[int, ...], blocks: int, z_channels: int) -> None:
        super().__init__()
        c = ch * mult[-1]
        self.conv_in = CausalConv(z_channels, c)
        self.mid = Mid(c)
        up: list[Level] = []
        for i in reversed(range(len(mult))):
            level = Level(
                [HunyuanVAEResnetBlock(c if j == 0 else ch * mult[i], ch * mult[i]) for j in range(blocks + 1)]
            )
            c = ch * mult[i]
            if i != 0:
                level.upsample = Resample(c)
                level.time = i <= TIME_LEVELS  # the deepest levels double time too
            up.insert(0, level)
        self.up = nn.ModuleList(up)
        self.norm_out = _norm(c)
        self.conv_out = CausalConv(c, 3)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = self.mid(self.conv_in(z))
        chunks = torch.split(h, DECODE_CHUNK, dim=2)
        out, carry_in = [], None
        for i, h in enumerate(chunks):
            carry_out = None if i == len(chunks) - 1 else []
            for level in reversed(self.up):
                h = level(h, carry_in, carry_out)
            out.append(self.conv_out(F.silu(self.norm_out(h)), carry_in, carry_out))
            carry_in = carry_out
        return torch.cat(out, dim=2)


class HunyuanVideoAutoencoder(nn.Module):
    def __init__(self, ch: int, mult: tuple[int, ...], blocks: int, z_channels: int, embed_dim: int) -> None:
        super().__init__()
        self.encoder = HunyuanVAEEncoder(ch, mult, blocks, z_channels)
        self.decoder = HunyuanVAEDecoder(ch, mult, blocks, z_channels)
        self.quant_conv = nn.Conv3d(2 * z_channels, 2 * embed_dim, 1)
        self.post_quant_conv = nn.Conv3d(embed_dim, z_channels, 1)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """[B,3,T,H,W] in -1..1 -> the posterior's mean [B,embed,1+(T-1)/4,H/8,W/8]."""
        return self.quant_conv(self.encoder(x)).chunk(2, dim=1)[0]

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.post_quant_conv(z))


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict:
    """The sizes of an unprefixed state dict: base width, per-level multipliers, blocks per level, latent widths."""
    ch = int(sd["encoder.conv_in.conv.weight"].shape[0])
    levels = len({k.split(".")[2] for k in sd if k.startswith("encoder.down.")})
    blocks = len({k.split(".")[4] for k in sd if k.startswith("encoder.down.0.block.")})
    widths = [int(sd[f"encoder.down.{i}.block.0.conv1.conv.weight"].shape[0]) for i in range(levels)]
    if any(w % ch for w in widths) or levels < 2 or blocks < 1:
        raise ValueError(f"level widths {widths} are not multiples of the base width {ch}")
    return {
        "ch": ch,
        "mult": tuple(w // ch for w in widths),
        "blocks": blocks,
        "z_channels": int(sd[MARKER].shape[1]),
        "embed_dim": int(sd["post_quant_conv.weight"].shape[1]),
    }


class HunyuanVideoVAE(VAEModel):
    """ComfyUI's VAE conventions for it: IMAGE [T,H,W,3] is one video -> [1,16,1+(T-1)//4,H/8,W/8]; a latent
    [B,16,T,h,w] -> IMAGE [B*(4T-3),H,W,3]."""

    @torch.no_grad()
    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        h, w = pixels.shape[1] // DOWNSCALE * DOWNSCALE, pixels.shape[2] // DOWNSCALE * DOWNSCALE
        if h == 0 or w == 0:
            raise ValueError(f"the HunyuanVideo VAE needs sides of at least {DOWNSCALE}, got {tuple(pixels.shape)}")
        top, left = (pixels.shape[1] % DOWNSCALE) // 2, (pixels.shape[2] % DOWNSCALE) // 2
        pixels = pixels[:, top : top + h, left : left + w, :3]
        x = pixels.movedim(-1, 0)[None].to(torch.float32) * 2.0 - 1.0
        return self.module.encode(x).float()

    encode_video = encode

    temporal_compression = TEMPORAL

    @staticmethod
    def decoded_size(dim: int, size: int) -> int:
        """Frames (dim 0) or pixels (1, 2) a latent extent decodes to: causal time 4(T-1)+1, space x8."""
        return max(0, size * TEMPORAL - (TEMPORAL - 1)) if dim == 0 else size * DOWNSCALE

    @staticmethod
    def decoded_position(dim: int, index: int) -> int:
        """Where latent index `index` lands in the decoded video (ComfyUI's index formula: x4 in time, x8 in space)."""
        return index * (TEMPORAL if dim == 0 else DOWNSCALE)

    @torch.no_grad()
    def decode_raw(self, latent: torch.Tensor) -> torch.Tensor:
        """[B,16,T,h,w] -> the decoder's output [B,3,4(T-1)+1,8h,8w] in -1..1, before ComfyUI's clamp (VAEDecodeTiled
        blends these; nodes.modelfns.vae.tiled_video)."""
        if latent.dim() != 5 or latent.shape[1] != self.latent_channels:
            raise ValueError(
                f"the HunyuanVideo VAE takes [B,{self.latent_channels},T,H,W] video latents, got {tuple(latent.shape)}"
            )
        return torch.cat([self.module.decode(latent[i : i + 1].float()) for i in range(latent.shape[0])])

    @staticmethod
    def to_image(x: torch.Tensor) -> torch.Tensor:
        """Decoder output [B,3,T,H,W] -> IMAGE [B*T,H,W,3] in 0..1."""
        image = ((x + 1.0) / 2.0).clamp(0.0, 1.0).movedim(1, -1)  # [B,T,H,W,C]
        return image.reshape(-1, *image.shape[2:])

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        return self.to_image(self.decode_raw(latent))


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> HunyuanVideoVAE:
    """The HunyuanVideo 1.0 VAE of a file, computed in float32 (as ComfyUI's VAE runs on a CPU)."""
    path = ref.sources[0] if ref.sources else None
    prefix = find_prefix(state_dict.keys(), MARKER)
    if prefix is None:
        raise ModelLoadError(path, f"not a HunyuanVideo VAE (no {MARKER})")
    sd = strip_prefix(state_dict, prefix)
    try:
        config = infer_config(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable HunyuanVideo VAE: {e}") from None
    module = build_module(lambda: HunyuanVideoAutoencoder(**config), sd, path, "HunyuanVideo VAE", dtype=torch.float32)
    return HunyuanVideoVAE(
        arch="hunyuan_video", module=module, latent_channels=config["embed_dim"], downscale=DOWNSCALE
    )
