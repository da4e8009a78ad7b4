"""LTX-2.5's diffusion video decoder (vae/ltx-2.5-video-vae-bf16.safetensors, `decoder.*`; ComfyUI's
comfy/ldm/lightricks/vae/na_diffusion_decoder.py NADiffusionDecoder, chosen in comfy/sd.py by
`decoder.conv_in_x_t.weight`). The file's encoder half is LTX-2's convolutional encoder.

A latent (un-normalized with the file's per-channel statistics) becomes pixels in two parts:
1. four deterministic stages, each a run of pre-norm transformer blocks (HeadRMSNorm, 3-D neighborhood attention, HeadRMSNorm,
   SwiGLU MLP, both residual) and then a linear pixel-shuffle upsample (a Linear widening the channels, unpacked
   channels-last into time x rows x columns; where time doubles, the causal shuffle's duplicated first frame is
   dropped). The last latent frame is repeated twice more before them (the attention border) and its frames cut
   off after. Per stage the temporal and spatial factors multiply to 8 and 8 (x4 patches: 32).
2. one diffusion step: Gaussian noise of the output's size (ComfyUI seeds a CPU generator with 0 on every decode),
   patchified 4x4 (channel order c, column, row), read by blocks that add a projection of the stage-4 context to
   the tokens and modulate both norms by a shared AdaLN (a SiLU-Linear of the timestep embedding of 1000 t at
   t = 1, seven chunks, of which scale/shift 0/1 and 3/4 are used) plus each block's own table. Its output is x0.

Attention: a fused qkv Linear; per-head HeadRMSNorm of q and k (eps 1e-6, scale stored as weights); rotary positions
per axis on interleaved pairs, the head split into time, row and column parts (a quarter of the head, rounded
down to even, for time; the rest halved), frequencies 1/10000^(2i/d) from 0-based grid positions; then NATTEN
neighborhood attention (comfy-kitchen's na3d, the kernel ComfyUI calls) with the stage's kernel. A kernel longer
than its axis (a short clip, a small frame) covers the whole axis there, as in ComfyUI; diffusers 0.42's
LTX2VideoDiffusionDecoderModel refuses such grids and needs NATTEN from the Hub or flex attention, so it is not used."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from diffusers.models.embeddings import get_timestep_embedding
from torch import nn

EPS = 1e-6
ROPE_BASE = 10_000.0
NOISE_SEED = 0


class HeadRMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, EPS)


def rope_split(head_dim: int) -> tuple[int, int, int]:
    """(time, row, column) widths of a head's rotary part, ComfyUI's default_rope_dim_split."""
    t = (head_dim // 4) // 2 * 2
    hw = (head_dim - t) // 2
    if hw % 2:
        t -= 2
        hw = (head_dim - t) // 2
    return t, hw, hw


def _angles(length: int, width: int) -> torch.Tensor:
    """[length, width/2] angles: position x inverse frequency, the frequencies computed in float64."""
    inv = 1.0 / torch.tensor(ROPE_BASE, dtype=torch.float64) ** (torch.arange(0, width, 2, dtype=torch.float64) / width)
    return torch.arange(length, dtype=torch.float32)[:, None] * inv.float()[None, :]


def rotate(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of interleaved pairs: x [..., tokens, heads, d], angles [tokens, d/2]."""
    pairs = x.unflatten(-1, (-1, 2))
    cos, sin = angles.cos()[:, None], angles.sin()[:, None]
    a, b = pairs[..., 0], pairs[..., 1]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


def grid_angles(t: int, h: int, w: int, head_dim: int) -> torch.Tensor:
    """[t*h*w, head_dim/2] angles of every grid position (time, row, column parts side by side)."""
    dt, dh, dw = rope_split(head_dim)
    at, ah, aw = _angles(t, dt), _angles(h, dh), _angles(w, dw)
    parts = (
        at[:, None, None].expand(t, h, w, -1),
        ah[None, :, None].expand(t, h, w, -1),
        aw[None, None, :].expand(t, h, w, -1),
    )
    return torch.cat(parts, dim=-1).reshape(t * h * w, -1)


class NeighborhoodAttention(nn.Module):
    def __init__(self, dim: int, kernel: Sequence[int], head_dim: int) -> None:
        super().__init__()
        self.heads, self.head_dim, self.kernel = dim // head_dim, head_dim, list(kernel)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.q_norm = HeadRMSNorm(head_dim)
        self.k_norm = HeadRMSNorm(head_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            import comfy_kitchen
        except ImportError as e:  # comfy-kitchen is installed on Linux and Windows only
            raise ValueError(
                f"LTX-2.5's video decoder needs comfy-kitchen, which is not installed here ({e})"
            ) from None

        b, t, h, w, dim = x.shape
        q, k, v = self.qkv(x).reshape(b, t * h * w, 3, self.heads, self.head_dim).unbind(2)
        angles = grid_angles(t, h, w, self.head_dim).to(x.device)
        q = rotate(self.q_norm(q), angles).reshape(b, t, h, w, self.heads, self.head_dim)
        k = rotate(self.k_norm(k), angles).reshape(b, t, h, w, self.heads, self.head_dim)
        v = v.reshape(b, t, h, w, self.heads, self.head_dim)
        out = comfy_kitchen.na3d(q.contiguous(), k.contiguous(), v.contiguous(), self.kernel, None, None)
        return self.proj(out.reshape(b, t, h, w, dim))


class SwiGLU(nn.Module):
    def __init__(self, dim: int, ratio: float = 4.0) -> None:
        super().__init__()
        hidden = (int(dim * ratio) + 15) // 16 * 16
        self.w_gate = nn.Linear(dim, hidden, bias=False)
        self.w_up = nn.Linear(dim, hidden, bias=False)
        self.w_down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))


class NeighborhoodBlock(nn.Module):
    def __init__(self, dim: int, kernel: Sequence[int], head_dim: int) -> None:
        super().__init__()
        self.norm1, self.attn = HeadRMSNorm(dim), NeighborhoodAttention(dim, kernel, head_dim)
        self.norm2, self.mlp = HeadRMSNorm(dim), SwiGLU(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class DiffusionBlock(NeighborhoodBlock):
    CHUNKS = 7

    def __init__(self, dim: int, kernel: Sequence[int], head_dim: int) -> None:
        super().__init__(dim, kernel, head_dim)
        self.context_proj = nn.Linear(dim, dim)
        self.scale_shift_table = nn.Parameter(torch.zeros(self.CHUNKS, dim))

    def forward(self, x: torch.Tensor, context: torch.Tensor, modulation: torch.Tensor) -> torch.Tensor:
        m = modulation + self.scale_shift_table[None]  # [B, 7, dim]
        scale_a, shift_a, scale_m, shift_m = (m[:, i, None, None, None] for i in (0, 1, 3, 4))
        x = x + self.context_proj(context)
        x = x + self.attn(self.norm1(x) * (1 + scale_a) + shift_a)
        return x + self.mlp(self.norm2(x) * (1 + scale_m) + shift_m)


class Upsample(nn.Module):
    def __init__(self, dim: int, stride: Sequence[int], reduction: int) -> None:
        super().__init__()
        self.stride = tuple(stride)
        self.out_channels = dim // reduction
        self.proj = nn.Linear(dim, math.prod(stride) * self.out_channels)

    def forward(self, x: torch.Tensor, drop_first: bool) -> torch.Tensor:
        b, t, h, w, _ = x.shape
        p1, p2, p3 = self.stride
        y = self.proj(x).reshape(b, t, h, w, self.out_channels, p1, p2, p3)
        y = y.permute(0, 1, 5, 2, 6, 3, 7, 4).reshape(b, t * p1, h * p2, w * p3, self.out_channels)
        return y[:, 1:] if p1 == 2 and drop_first else y


class TimestepEmbedder(nn.Module):
    def __init__(self, dim: int, freq_dim: int = 256) -> None:
        super().__init__()
        self.freq_dim = freq_dim
        self.mlp = nn.Sequential(nn.Linear(freq_dim, dim), nn.SiLU(), nn.Linear(dim, dim))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        emb = get_timestep_embedding(t, self.freq_dim, flip_sin_to_cos=True, downscale_freq_shift=0, scale=1)
        return self.mlp(emb)


class SharedAdaLN(nn.Module):
    def __init__(self, dim: int, t_dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(t_dim, DiffusionBlock.CHUNKS * dim)

    def forward(self, t_emb: torch.Tensor) -> torch.Tensor:
        return self.proj(F.silu(t_emb)).unflatten(-1, (DiffusionBlock.CHUNKS, -1))


class DiffusionDecoder(nn.Module):
    """The `decoder.*` network; sizes as the file's metadata (ComfyUI's defaults when absent)."""

    def __init__(
        self,
        in_channels: int = 128,
        out_channels: int = 3,
        patch_size: int = 4,
        head_dim: int = 64,
        stage_channels: Sequence[int] = (2048, 1024, 512, 512, 256),
        stage_depths: Sequence[int] = (4, 6, 4, 2, 8),
        stage_kernels: Sequence[Sequence[int]] = ((3, 7, 7), (3, 7, 7), (3, 5, 5), (3, 5, 5), (11, 11, 11)),
        upsamples: Sequence[tuple[Sequence[int], int]] = (
            ((1, 2, 2), 2),
            ((2, 1, 1), 2),
            ((2, 2, 2), 1),
            ((2, 2, 2), 2),
        ),
        stage5_kernel: Sequence[int] = (11, 11, 11),
        t_emb_dim: int = 384,
        timestep_scale_multiplier: float = 1000.0,
    ) -> None:
        super().__init__()
        if len(stage_channels) != len(upsamples) + 1 or len(stage_depths) != len(stage_channels):
            raise ValueError("stage_channels and stage_depths need one entry more than upsamples")
        self.patch_size, self.out_channels = patch_size, out_channels
        self.timestep_scale = timestep_scale_multiplier
        self.temporal_upscale = math.prod(s[0] for s, _ in upsamples)
        self.spatial_upscale = math.prod(s[1] for s, _ in upsamples) * patch_size
        self.trailing_frames = (stage_kernels[0][0] // 2) * 2
        self.conv_in = nn.Linear(in_channels, stage_channels[0])
        self.det_stages = nn.ModuleList(
            nn.ModuleList(NeighborhoodBlock(c, stage_kernels[i], head_dim) for _ in range(stage_depths[i]))
            for i, c in enumerate(stage_channels[:-1])
        )
        self.upsamples = nn.ModuleList(
            Upsample(c, stride, reduction)
            for c, (stride, reduction) in zip(stage_channels[:-1], upsamples, strict=True)
        )
        last = stage_channels[-1]
        self.t_embedder = TimestepEmbedder(t_emb_dim)
        self.conv_in_x_t = nn.Linear(out_channels * patch_size**2, last)
        self.shared_adaln = SharedAdaLN(last, t_emb_dim)
        self.diff_blocks = nn.ModuleList(DiffusionBlock(last, stage5_kernel, head_dim) for _ in range(stage_depths[-1]))
        self.norm_out = HeadRMSNorm(last)
        self.conv_out = nn.Linear(last, out_channels * patch_size**2)

    def output_frames(self, latent_frames: int) -> int:
        return max(0, latent_frames * self.temporal_upscale - (self.temporal_upscale - 1))

    def context(self, z: torch.Tensor) -> torch.Tensor:
        """Stages 1-4: [B, C, T, H, W] latent -> [B, T', H', W', C'] context, channels last."""
        n = self.trailing_frames
        z = torch.cat([z, z[:, :, -1:].expand(-1, -1, n, -1, -1)], dim=2)
        x = self.conv_in(z.permute(0, 2, 3, 4, 1))
        for blocks, upsample in zip(self.det_stages, self.upsamples, strict=True):
            for block in blocks:
                x = block(x)
            x = upsample(x, drop_first=True)
        return x[:, : x.shape[1] - n * self.temporal_upscale] if n else x

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        context = self.context(z)
        b, t, h, w, _ = context.shape
        p = self.patch_size
        generator = torch.Generator(device="cpu").manual_seed(NOISE_SEED)
        noise = torch.randn((b, self.out_channels, t, h * p, w * p), generator=generator, dtype=z.dtype).to(z.device)
        # patchify: channel order (c, column, row) within each token, as ComfyUI's rearrange "(c p r q)"
        x = noise.reshape(b, self.out_channels, t, h, p, w, p).permute(0, 2, 3, 5, 1, 6, 4).reshape(b, t, h, w, -1)
        x = self.conv_in_x_t(x)
        step = torch.ones(b, dtype=z.dtype, device=z.device)
        modulation = self.shared_adaln(self.t_embedder(self.timestep_scale * step))
        for block in self.diff_blocks:
            x = block(x, context, modulation)
        x = self.conv_out(self.norm_out(x)).reshape(b, t, h, w, self.out_channels, p, p)
        return x.permute(0, 4, 1, 2, 6, 3, 5).reshape(b, self.out_channels, t, h * p, w * p)
