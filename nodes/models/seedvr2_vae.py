"""SeedVR2's causal video VAE (ByteDance's video_vae_v3, as today's ComfyUI builds it in comfy/ldm/seedvr/vae.py
and loads it in comfy/sd.py): 16 latent channels, 8x in space, 4x in time (4n+1 frames <-> n+1 latent frames).

Every convolution is causal in time: a frame sees only itself and earlier frames, the clip's first frame standing in
for the frames before it (2 x its temporal padding copies in front, nothing behind); space is zero-padded.
GroupNorm normalises each frame on its own, and the middle blocks' single-head attention runs within each frame.
So one pass over the whole clip gives what ComfyUI's temporal slices with their carried caches give.

Layout of the published file (ema_vae_fp16.safetensors; widths from the file, the published ones 128, 256, 512, 512):
- encoder: conv_in, down_blocks.{0..3} (two resnets each; downsamplers.0.conv on the first three, strided 2 in
  space over a right/bottom zero border, and 2 in time too on blocks 1 and 2), mid_block (resnet, attention, resnet),
  conv_norm_out, conv_out (mean and log-variance: the mean is the latent, times 0.9152);
- decoder: conv_in, mid_block, up_blocks.{0..3} (three resnets each; upsamplers.0 on the first three: a 1x1x1
  upscale_conv to 4 (or 8, on blocks 0 and 1, which double time too) times the channels, a pixel shuffle, a causal
  3x3x3 conv; the clip's first frame is not doubled), conv_norm_out, conv_out."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from nodes.models.components import VAEModel

LATENT_CHANNELS = 16
SCALING_FACTOR = 0.9152  # the authors' configs_3b/main.yaml, as ComfyUI's constants
SPATIAL, TEMPORAL = 8, 4
GROUPS = 32
EPS = 1e-6


def frame_norm(norm: nn.GroupNorm, x: torch.Tensor) -> torch.Tensor:
    """GroupNorm of [B,C,T,H,W] over each frame's channels and pixels."""
    b, c, t, h, w = x.shape
    y = F.group_norm(x.transpose(1, 2).reshape(b * t, c, h, w), norm.num_groups, norm.weight, norm.bias, norm.eps)
    return y.reshape(b, t, c, h, w).transpose(1, 2)


class CausalConv3d(nn.Conv3d):
    """A Conv3d whose temporal padding repeats the first frame in front (twice the padding) instead of zeros on
    both sides; the spatial padding stays the conv's own."""

    def __init__(self, cin: int, cout: int, kernel, stride=1, padding=0) -> None:
        kernel = (kernel,) * 3 if isinstance(kernel, int) else tuple(kernel)
        padding = (padding,) * 3 if isinstance(padding, int) else tuple(padding)
        super().__init__(cin, cout, kernel, stride=stride, padding=(0, *padding[1:]))
        self.front = 2 * padding[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.front:
            x = torch.cat([x[:, :, :1].expand(-1, -1, self.front, -1, -1), x], dim=2)
        return super().forward(x)


class ResnetBlock(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(GROUPS, cin, eps=EPS)
        self.conv1 = CausalConv3d(cin, cout, 3, padding=1)
        self.norm2 = nn.GroupNorm(GROUPS, cout, eps=EPS)
        self.conv2 = CausalConv3d(cout, cout, 3, padding=1)
        self.conv_shortcut = CausalConv3d(cin, cout, 1) if cin != cout else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(frame_norm(self.norm1, x)))
        h = self.conv2(F.silu(frame_norm(self.norm2, h)))
        return h + (x if self.conv_shortcut is None else self.conv_shortcut(x))


class FrameAttention(nn.Module):
    """Single-head self-attention over each frame's pixels, residual included."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.group_norm = nn.GroupNorm(GROUPS, channels, eps=EPS)
        self.to_q, self.to_k, self.to_v = (nn.Linear(channels, channels) for _ in range(3))
        self.to_out = nn.ModuleList([nn.Linear(channels, channels)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, t, h, w = x.shape
        frames = x.transpose(1, 2).reshape(b * t, c, h * w)
        tokens = self.group_norm(frames).transpose(1, 2)  # [frames, pixels, C]
        q, k, v = (proj(tokens)[:, None] for proj in (self.to_q, self.to_k, self.to_v))
        out = self.to_out[0](F.scaled_dot_product_attention(q, k, v)[:, 0])
        out = out.transpose(1, 2) + frames
        return out.reshape(b, t, c, h, w).transpose(1, 2)


class MidBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock(channels, channels) for _ in range(2)])
        self.attentions = nn.ModuleList([FrameAttention(channels)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.resnets[1](self.attentions[0](self.resnets[0](x)))


class CausalDownsample(nn.Module):
    def __init__(self, channels: int, temporal: bool) -> None:
        super().__init__()
        self.conv = CausalConv3d(
            channels, channels, (3 if temporal else 1, 3, 3), stride=(2 if temporal else 1, 2, 2),
            padding=(1 if temporal else 0, 0, 0),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, (0, 1, 0, 1)))


class CausalUpsample(nn.Module):
    def __init__(self, channels: int, temporal: bool) -> None:
        super().__init__()
        self.time = 2 if temporal else 1
        self.upscale_conv = nn.Conv3d(channels, channels * 4 * self.time, 1)
        self.conv = CausalConv3d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, t, h, w = x.shape
        y = self.upscale_conv(x)
        c = y.shape[1] // (4 * self.time)
        # the expansion's channels are (row phase, column phase, time phase, channel)
        y = y.view(b, 2, 2, self.time, c, t, h, w).permute(0, 4, 5, 3, 6, 1, 7, 2)
        y = y.reshape(b, c, t * self.time, 2 * h, 2 * w)
        if self.time == 2:  # the clip's first frame stays one frame
            y = torch.cat([y[:, :, :1], y[:, :, 2:]], dim=2)
        return self.conv(y)


class SamplingBlock(nn.Module):
    def __init__(self, cin: int, cout: int, layers: int, sampler: nn.Module | None, kind: str) -> None:
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock(cin if i == 0 else cout, cout) for i in range(layers)])
        if sampler is not None:
            setattr(self, kind, nn.ModuleList([sampler]))
        self.kind = kind if sampler is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for resnet in self.resnets:
            x = resnet(x)
        return getattr(self, self.kind)[0](x) if self.kind else x


class Encoder(nn.Module):
    def __init__(self, widths: tuple[int, ...], temporal_downs: int = 2) -> None:
        super().__init__()
        self.conv_in = CausalConv3d(3, widths[0], 3, padding=1)
        last = len(widths) - 1
        self.down_blocks = nn.ModuleList(
            SamplingBlock(
                widths[max(i - 1, 0)], w, 2,
                CausalDownsample(w, temporal=i >= last - temporal_downs) if i < last else None, "downsamplers",
            )
            for i, w in enumerate(widths)
        )  # fmt: skip
        self.mid_block = MidBlock(widths[-1])
        self.conv_norm_out = nn.GroupNorm(GROUPS, widths[-1], eps=EPS)
        self.conv_out = CausalConv3d(widths[-1], 2 * LATENT_CHANNELS, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_in(x)
        for block in self.down_blocks:
            x = block(x)
        return self.conv_out(F.silu(frame_norm(self.conv_norm_out, self.mid_block(x))))


class Decoder(nn.Module):
    def __init__(self, widths: tuple[int, ...], temporal_ups: int = 2) -> None:
        super().__init__()
        rev = tuple(reversed(widths))
        self.conv_in = CausalConv3d(LATENT_CHANNELS, rev[0], 3, padding=1)
        self.mid_block = MidBlock(rev[0])
        last = len(rev) - 1
        self.up_blocks = nn.ModuleList(
            SamplingBlock(
                rev[max(i - 1, 0)], w, 3,
                CausalUpsample(w, temporal=i < temporal_ups) if i < last else None, "upsamplers",
            )
            for i, w in enumerate(rev)
        )  # fmt: skip
        self.conv_norm_out = nn.GroupNorm(GROUPS, widths[0], eps=EPS)
        self.conv_out = CausalConv3d(widths[0], 3, 3, padding=1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = self.mid_block(self.conv_in(z))
        for block in self.up_blocks:
            x = block(x)
        return self.conv_out(F.silu(frame_norm(self.conv_norm_out, x)))


class SeedVR2VAEModule(nn.Module):
    def __init__(self, widths: tuple[int, ...]) -> None:
        super().__init__()
        self.encoder = Encoder(widths)
        self.decoder = Decoder(widths)

    def encode_pixels(self, pixels: torch.Tensor) -> torch.Tensor:
        """[B,3,4n+1,8h,8w] in -1..1 -> the scaled latent mean [B,16,n+1,h,w]."""
        return self.encoder(pixels)[:, :LATENT_CHANNELS] * SCALING_FACTOR

    def decode_latent(self, latent: torch.Tensor) -> torch.Tensor:
        """The scaled latent [B,16,n+1,h,w] -> [B,3,4n+1,8h,8w], unclamped."""
        return self.decoder(latent / SCALING_FACTOR)


def widths_of(shapes) -> tuple[int, ...]:
    """The encoder's block widths, from each down block's first conv."""
    widths, i = [], 0
    while f"encoder.down_blocks.{i}.resnets.0.conv1.weight" in shapes:
        widths.append(int(shapes[f"encoder.down_blocks.{i}.resnets.0.conv1.weight"][0]))
        i += 1
    return tuple(widths)


def _cosine_ramp(n: int, device) -> torch.Tensor:
    t = torch.linspace(0, 1, steps=n, device=device, dtype=torch.float32)
    return 0.5 - 0.5 * torch.cos(t * torch.pi)


def spatial_tiles(x: torch.Tensor, run, tile: tuple[int, int], overlap: tuple[int, int], encode: bool) -> torch.Tensor:
    """ComfyUI's tiling for this VAE (comfy/ldm/seedvr/vae.py's tiled_vae): space only (time stays whole, its
    causality intact), tiles of `tile` input units stepping by tile - overlap, a tile left out when all it adds is
    inside the overlap; each tile's output weighted by cosine ramps over the overlaps it shares and the sum divided
    by the weights. `run` maps [B,C,T,h,w] input to [B,C',T',h',w'] output."""
    _, _, t, h, w = x.shape
    if encode:
        (th, tw), (oh, ow) = (
            tile,
            (min(max(0, overlap[0]), max(1, tile[0]) - 1), min(max(0, overlap[1]), max(1, tile[1]) - 1)),
        )
        blend = (oh // SPATIAL, ow // SPATIAL)
        out_t, out_h, out_w = -(-t // TEMPORAL), -(-h // SPATIAL), -(-w // SPATIAL)
    else:
        th, tw = max(1, tile[0] // SPATIAL), max(1, tile[1] // SPATIAL)
        oh, ow = min(max(0, overlap[0] // SPATIAL), th - 1), min(max(0, overlap[1] // SPATIAL), tw - 1)
        blend = (oh * SPATIAL, ow * SPATIAL)
        out_t, out_h, out_w = max(1, t * TEMPORAL - (TEMPORAL - 1)), h * SPATIAL, w * SPATIAL
    if h <= th and w <= tw:
        return run(x)[:, :, :out_t, :out_h, :out_w]
    scale = (lambda i: i // SPATIAL) if encode else (lambda i: i * SPATIAL)
    result = count = None
    for y0 in range(0, h, max(1, th - oh)):
        y1 = min(y0 + th, h)
        if y0 > 0 and y1 - y0 <= oh:
            continue
        for x0 in range(0, w, max(1, tw - ow)):
            x1 = min(x0 + tw, w)
            if x0 > 0 and x1 - x0 <= ow:
                continue
            out = run(x[:, :, :, y0:y1, x0:x1]).float()
            if result is None:
                result = out.new_zeros((*out.shape[:2], out_t, out_h, out_w))
                count = out.new_zeros((1, 1, 1, out_h, out_w))
            weights = []
            for size, n, start, end, limit in (
                (out.shape[3], blend[0], y0, y1, h),
                (out.shape[4], blend[1], x0, x1, w),
            ):
                wt = torch.ones(size, device=out.device)
                n = min(n, size // 2)
                if n > 0:
                    ramp = _cosine_ramp(n, out.device)
                    if start > 0:
                        wt[:n] = ramp
                    if end < limit:
                        wt[-n:] = 1.0 - ramp
                weights.append(wt)
            weight = weights[0].view(1, 1, 1, -1, 1) * weights[1].view(1, 1, 1, 1, -1)
            ys, xs = scale(y0), scale(x0)
            frames = min(out.shape[2], out_t)
            result[:, :, :frames, ys : ys + out.shape[3], xs : xs + out.shape[4]] += out[:, :, :frames] * weight
            count[:, :, :, ys : ys + out.shape[3], xs : xs + out.shape[4]] += weight
    return (result / count.clamp(min=1e-6)).to(x.dtype)


class SeedVR2VAE(VAEModel):
    """ComfyUI's conventions for this VAE (comfy/sd.py): an IMAGE batch is the frames of one video; pixels go in as
    2x-1 (uncropped: SeedVR2Preprocess pads them) and come out clamped (x+1)/2; the tiled nodes tile in space only,
    through the model's own tiling (tile and overlap in pixels, as the nodes give them)."""

    temporal_compression = TEMPORAL

    def _video(self, pixels: torch.Tensor) -> torch.Tensor:
        """IMAGE frames [T,H,W,C] (one video) or SeedVR2Preprocess's clips [B,T,H,W,C] -> [B,3,T,H,W] in -1..1."""
        if pixels.dim() not in (4, 5):
            raise ValueError(
                "the SeedVR2 VAE encodes IMAGE frames [frames, height, width, 3] or clips "
                f"[clips, frames, height, width, 3], got {tuple(pixels.shape)}"
            )
        clips = pixels[None] if pixels.dim() == 4 else pixels
        return clips[..., :3].movedim(-1, 1).float() * 2.0 - 1.0

    @torch.no_grad()
    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        """IMAGE [T,H,W,3] (or clips [B,T,H,W,3]) -> [B,16,n+1,H/8,W/8] for 4n+1 frames."""
        return self.module.encode_pixels(self._video(pixels))

    @torch.no_grad()
    def encode_tiled(self, pixels: torch.Tensor, tile: int, overlap: int) -> torch.Tensor:
        # ComfyUI keeps the overlap at least 8 pixels inside the tile
        ov = (min(overlap, max(0, tile - 8)),) * 2
        return spatial_tiles(self._video(pixels), self.module.encode_pixels, (tile, tile), ov, encode=True)

    def _check(self, latent: torch.Tensor) -> torch.Tensor:
        if latent.dim() != 5 or latent.shape[1] != LATENT_CHANNELS:
            raise ValueError(
                f"the SeedVR2 VAE decodes [batch, {LATENT_CHANNELS}, frames, height, width] latents, "
                f"got {tuple(latent.shape)}"
            )
        return latent.float()

    @staticmethod
    def to_image(x: torch.Tensor) -> torch.Tensor:
        """[B,3,T,H,W] -> IMAGE [B*T,H,W,3] in 0..1."""
        image = ((x + 1.0) / 2.0).clamp(0.0, 1.0).movedim(1, -1)
        return image.reshape(-1, *image.shape[2:])

    @torch.no_grad()
    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        return self.to_image(self.module.decode_latent(self._check(latent)))

    @torch.no_grad()
    def decode_tiled(self, latent: torch.Tensor, tile: int, overlap: int) -> torch.Tensor:
        """VAEDecodeTiled's tile and overlap in pixels, as ComfyUI's node turns them into latent units and back."""
        tile_px, ov = (tile // SPATIAL) * SPATIAL, (overlap // SPATIAL) * SPATIAL
        ovs = (min(ov, max(0, tile_px - 8)),) * 2
        out = spatial_tiles(self._check(latent), self.module.decode_latent, (tile_px, tile_px), ovs, encode=False)
        return self.to_image(out)


def load_vae(ref, state_dict) -> SeedVR2VAE:
    """The VAE of a bare SeedVR2 VAE file (ComfyUI's layout, the authors' names); float32 compute."""
    from nodes.models.errors import ModelLoadError
    from nodes.models.safetensors_io import build_module

    path = ref.sources[0] if ref.sources else None
    shapes = {k: tuple(v.shape) for k, v in state_dict.items()}
    widths = widths_of(shapes)
    if len(widths) < 2 or any(w % GROUPS for w in widths):
        raise ModelLoadError(path, f"not a usable SeedVR2 VAE (encoder block widths {widths})")
    module = build_module(lambda: SeedVR2VAEModule(widths), dict(state_dict), path, "SeedVR2 VAE")
    return SeedVR2VAE(arch="seedvr2", module=module, latent_channels=LATENT_CHANNELS, downscale=SPATIAL)
