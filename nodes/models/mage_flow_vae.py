"""Mage-VAE (vae/mage_flow_vae_bf16.safetensors of Comfy-Org/Mage-Flow): Mage-Flow's image codec, a one-step
diffusion model each way between RGB pixels and 128 latent channels at 1/16 of the size (Flux.2-anchored, used
raw: no scale, no batch norm, no patch packing).

- encode: a DConv encoder predicts (mean, logvar) from the image patches with a zero latent at t = 0; the
  mean is the latent (no sampling, as ComfyUI takes it);
- decode: a CoD decoder (3 residual blocks, 2 window-attention blocks over 32x32 latent windows, the windows
  padded by replicating the edge) turns the latent into per-patch features; a DConv denoiser with an MLP pixel
  head (a DCT position code per pixel of the 16x16 patch) predicts the image from a zero image at t = 0.

The file keeps the encoder under `student.dconv_encoder.` and the decoder under `pipeline.`, and carries the
Flux.2 VAE it was anchored to (`pipeline.y_embedder.encoder.`, `pipeline.y_embedder.bottleneck.`), which nothing
reads; the newest ComfyUI source (comfy/sd.py, comfy/ldm/mage_flow/vae.py) maps and drops them the same way. The
sizes (widths, block counts, the pixel head's width and DCT frequencies) are read from the shapes; ComfyUI fixes the
released ones. Pixels 0..1 are mapped to -1..1 and back, outputs clamped, as ComfyUI's VAE does."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from cluster.refs import ModelRef
from nodes.models.components import VAEModel
from nodes.models.detect import MAGE_VAE_MARKER
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import count_blocks
from nodes.models.safetensors_io import build_module
from nodes.models.vae import crop_to_multiple

ENCODER, DECODER = "student.dconv_encoder.", "pipeline."
ANCHOR = ("y_embedder.encoder.", "y_embedder.bottleneck.")  # the Flux.2 VAE the file carries, unused
WINDOW = 32  # the CoD decoder's attention windows, in latent cells (no weight says it)
GROUPS = 32  # its group norms
EPS = 1e-6
FREQ_DIM = 256  # the timestep MLPs' sinusoid width


def _channel_norm(x: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
    """LayerNorm over the channels of [B,C,H,W]."""
    return norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def _shift_scale(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * (1 + scale[:, :, None, None]) + shift[:, :, None, None]


class TimeEmbedding(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(FREQ_DIM, width), nn.SiLU(), nn.Linear(width, width))

    def forward(self, t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        half = FREQ_DIM // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half).to(t.device)
        angles = t.reshape(-1, 1).float() * freqs[None]
        return self.mlp(torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1).to(dtype))


class ConvBlock(nn.Module):
    """The DConv block: pointwise, depthwise 3x3, GELU, channel gate, pointwise; a pointwise GELU MLP. With
    `width` of the conditioning it is modulated (shift, scale, gate per half) and its norms carry no weights."""

    def __init__(self, width: int, hidden: int, modulated: bool) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(width, width, 1)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, groups=width)
        self.conv3 = nn.Conv2d(width, width, 1)
        self.ca = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(width, width, 1), nn.Sigmoid())
        self.conv4 = nn.Conv2d(width, hidden, 1)
        self.conv5 = nn.Conv2d(hidden, width, 1)
        self.norm1 = nn.LayerNorm(width, eps=EPS, elementwise_affine=not modulated)
        self.norm2 = nn.LayerNorm(width, eps=EPS, elementwise_affine=not modulated)
        self.modulated = modulated
        if modulated:
            self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(width, 6 * width))

    def forward(self, x: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
        h1, h2 = _channel_norm(x, self.norm1), None
        if self.modulated:
            shift1, scale1, gate1, shift2, scale2, gate2 = self.adaLN_modulation(c).chunk(6, dim=1)
            h1 = _shift_scale(h1, shift1, scale1)
        h = F.gelu(self.conv2(self.conv1(h1)))
        h = self.conv3(h * self.ca(h))
        x = x + (gate1[:, :, None, None] * h if self.modulated else h)
        h2 = _channel_norm(x, self.norm2)
        if self.modulated:
            h2 = _shift_scale(h2, shift2, scale2)
        h = self.conv5(F.gelu(self.conv4(h2)))
        return x + (gate2[:, :, None, None] * h if self.modulated else h)


class MageEncoder(nn.Module):
    def __init__(self, sd: Mapping[str, torch.Tensor]) -> None:
        super().__init__()
        head, _, self.patch, _ = sd["patch_cond_embed.weight"].shape
        width = sd["proj_down.weight"].shape[0]
        self.z_channels = sd["z_proj.weight"].shape[1]
        self.patch_cond_embed = nn.Conv2d(3, head, self.patch, stride=self.patch)
        head_hidden = sd["head_blocks.0.conv4.weight"].shape[0]
        self.head_blocks = nn.ModuleList(
            ConvBlock(head, head_hidden, False) for _ in range(count_blocks(sd, "head_blocks"))
        )
        self.proj_down = nn.Conv2d(head, width, 1)
        self.z_proj = nn.Conv2d(self.z_channels, width, 1)
        self.fuse_proj = nn.Conv2d(2 * width, width, 1)
        self.t_embedder = TimeEmbedding(width)
        hidden = sd["blocks.0.conv4.weight"].shape[0]
        self.blocks = nn.ModuleList(ConvBlock(width, hidden, True) for _ in range(count_blocks(sd, "blocks")))
        self.norm_out = nn.LayerNorm(width, eps=EPS)
        self.proj_out = nn.Conv2d(width, sd["proj_out.weight"].shape[0], 1)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        """[B,3,H,W] in -1..1 -> the posterior mean [B,z,H/p,W/p] (zero latent, t = 0)."""
        b, _, h, w = image.shape
        cond = self.patch_cond_embed(image)
        for block in self.head_blocks:
            cond = block(cond)
        zero = torch.zeros(b, self.z_channels, h // self.patch, w // self.patch, dtype=image.dtype)
        s = self.fuse_proj(torch.cat([self.proj_down(cond), self.z_proj(zero)], dim=1))
        c = self.t_embedder(torch.zeros(b), image.dtype)
        for block in self.blocks:
            s = block(s, c)
        return self.proj_out(_channel_norm(s, self.norm_out))[:, : self.z_channels]


class ResBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(GROUPS, width, eps=EPS)
        self.conv1 = nn.Conv2d(width, width, 3, padding=1)
        self.norm2 = nn.GroupNorm(GROUPS, width, eps=EPS)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.silu(self.norm2(self.conv1(F.silu(self.norm1(x))))))


class WindowAttention(nn.Module):
    """Self-attention within WINDOW x WINDOW windows; the map is padded to whole windows by repeating its edge."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(GROUPS, width, eps=EPS)
        self.q, self.k, self.v = (nn.Conv2d(width, width, 1) for _ in range(3))
        self.proj_out = nn.Conv2d(width, width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        pad = (0, -w % WINDOW, 0, -h % WINDOW)
        n = self.norm(x)
        q, k, v = (F.pad(conv(n), pad, mode="replicate") if any(pad) else conv(n) for conv in (self.q, self.k, self.v))
        rows, cols = q.shape[2] // WINDOW, q.shape[3] // WINDOW

        def windows(t: torch.Tensor) -> torch.Tensor:  # [B*windows, C, WINDOW*WINDOW]
            t = t.reshape(b, c, rows, WINDOW, cols, WINDOW).permute(0, 2, 4, 1, 3, 5)
            return t.reshape(b * rows * cols, c, WINDOW * WINDOW)

        q, k, v = (windows(t).transpose(1, 2)[:, None] for t in (q, k, v))  # [B*windows, 1, positions, C]
        out = F.scaled_dot_product_attention(q, k, v)[:, 0].transpose(1, 2)
        out = out.reshape(b, rows, cols, c, WINDOW, WINDOW).permute(0, 3, 1, 4, 2, 5)
        out = out.reshape(b, c, rows * WINDOW, cols * WINDOW)[:, :, :h, :w]
        return x + self.proj_out(out)


class LatentDecoder(nn.Module):
    """The CoD decoder: latent -> the denoiser's per-patch conditioning features."""

    def __init__(self, sd: Mapping[str, torch.Tensor]) -> None:
        super().__init__()
        width, z = sd["conv_in.weight"].shape[:2]
        self.conv_in = nn.Conv2d(z, width, 3, padding=1)
        self.block = nn.Sequential(
            ResBlock(width), WindowAttention(width), ResBlock(width), WindowAttention(width), ResBlock(width)
        )
        self.norm_out = nn.GroupNorm(GROUPS, width, eps=EPS)
        self.conv_out = nn.Conv2d(width, width, 3, padding=1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.conv_out(F.silu(self.norm_out(self.block(self.conv_in(z)))))


class PatchEmbed(nn.Module):
    def __init__(self, patch: int, bottleneck: int, width: int) -> None:
        super().__init__()
        self.proj1 = nn.Conv2d(3, bottleneck, patch, stride=patch, bias=False)
        self.proj2 = nn.Conv2d(bottleneck + width, width, 1)

    def forward(self, image: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        return self.proj2(torch.cat([self.proj1(image), cond], dim=1))


class PixelEmbed(nn.Module):
    """A pixel's features joined with its DCT position code within the patch (freqs^2 cosine products)."""

    def __init__(self, in_features: int, width: int) -> None:
        super().__init__()
        self.embedder = nn.Sequential(nn.Linear(in_features, width))

    def forward(self, x: torch.Tensor, freqs: int) -> torch.Tensor:
        side = math.isqrt(x.shape[1])
        pos = torch.linspace(0, 1, side, dtype=x.dtype)
        pos_y, pos_x = torch.meshgrid(pos, pos, indexing="ij")
        f = torch.linspace(0, freqs, freqs, dtype=x.dtype)
        code = (
            torch.cos(pos_x.reshape(-1, 1, 1) * f[None, :, None] * torch.pi)
            * torch.cos(pos_y.reshape(-1, 1, 1) * f[None, None, :] * torch.pi)
            / (1 + f[None, :, None] * f[None, None, :])
        )
        code = code.reshape(1, side * side, freqs * freqs).expand(x.shape[0], -1, -1)
        return self.embedder(torch.cat([x, code], dim=-1))


class PixelResBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.in_ln = nn.LayerNorm(width, eps=EPS)
        self.mlp = nn.Sequential(nn.Linear(width, width), nn.SiLU(), nn.Linear(width, width))
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(width, 3 * width))

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        shift, scale, gate = self.adaLN_modulation(c).chunk(3, dim=-1)
        return x + gate * self.mlp(self.in_ln(x) * (1 + scale) + shift)


class PixelHead(nn.Module):
    def __init__(self, sd: Mapping[str, torch.Tensor], patch: int) -> None:
        super().__init__()
        width = sd["input_proj.weight"].shape[0]
        self.patch = patch
        self.cond_embed = nn.Linear(sd["cond_embed.weight"].shape[1], patch * patch * width)
        self.input_proj = nn.Linear(sd["input_proj.weight"].shape[1], width)
        self.res_blocks = nn.ModuleList(PixelResBlock(width) for _ in range(count_blocks(sd, "res_blocks")))

    def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        x = self.input_proj(x)
        c = self.cond_embed(s).reshape(s.shape[0], self.patch * self.patch, -1)
        for block in self.res_blocks:
            x = block(x, c)
        return x


class PixelOutput(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(width, eps=EPS)
        self.linear = nn.Linear(width, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.norm(x))


class YEmbedder(nn.Module):
    def __init__(self, sd: Mapping[str, torch.Tensor]) -> None:
        super().__init__()
        self.decoder = LatentDecoder(_sub(sd, "y_embedder.decoder."))


class Denoiser(nn.Module):
    def __init__(self, sd: Mapping[str, torch.Tensor]) -> None:
        super().__init__()
        bottleneck, _, self.patch, _ = sd["s_embedder.proj1.weight"].shape
        self.width = sd["s_embedder.proj2.weight"].shape[0]
        pixel_width = sd["x_embedder.embedder.0.weight"].shape[0]
        self.freqs = math.isqrt(sd["x_embedder.embedder.0.weight"].shape[1] - 3 - pixel_width)
        self.t_embedder = TimeEmbedding(self.width)
        self.y_embedder_x = nn.Conv2d(self.width, pixel_width * self.patch**2, 1)
        self.x_embedder = PixelEmbed(3 + pixel_width + self.freqs**2, pixel_width)
        self.s_embedder = PatchEmbed(self.patch, bottleneck, self.width)
        hidden = sd["blocks.0.conv4.weight"].shape[0]
        self.blocks = nn.ModuleList(ConvBlock(self.width, hidden, True) for _ in range(count_blocks(sd, "blocks")))
        self.dec_net = PixelHead(_sub(sd, "dec_net."), self.patch)
        self.final_layer = PixelOutput(pixel_width)
        self.y_embedder = YEmbedder(sd)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """[B,z,h,w] -> [B,3,h*p,w*p] in -1..1 (zero image, t = 0)."""
        cond = self.y_embedder.decoder(z)
        b, _, h, w = cond.shape
        p = self.patch
        image = torch.zeros(b, 3, h * p, w * p, dtype=z.dtype)
        c = self.t_embedder(torch.zeros(b), z.dtype)
        s = self.s_embedder(image, cond)
        for block in self.blocks:
            s = block(s, c)
        cells = h * w
        s = s.permute(0, 2, 3, 1).reshape(b * cells, self.width)
        pixels = torch.cat([F.unfold(image, p, stride=p), self.y_embedder_x(cond).flatten(2)], dim=1)
        pixels = pixels.reshape(b, -1, p * p, cells).permute(0, 3, 2, 1).flatten(0, 1)
        out = self.final_layer(self.dec_net(self.x_embedder(pixels, self.freqs), s))  # [B*cells, p*p, 3]
        out = out.transpose(1, 2).reshape(b, cells, 3 * p * p).transpose(1, 2)
        return F.fold(out.contiguous(), (h * p, w * p), p, stride=p)


class MageVAENetwork(nn.Module):
    def __init__(self, sd: Mapping[str, torch.Tensor]) -> None:
        super().__init__()
        self.dconv_encoder = MageEncoder(_sub(sd, "dconv_encoder."))
        self.decoder_model = Denoiser(_sub(sd, "decoder_model."))


def _sub(sd: Mapping[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix) :]: v for k, v in sd.items() if k.startswith(prefix)}


def to_module_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The published names -> MageVAENetwork's: the encoder, the decoder, the anchor VAE dropped."""
    out = {}
    for key, value in state_dict.items():
        if key.startswith(ENCODER):
            out["dconv_encoder." + key[len(ENCODER) :]] = value
        elif key.startswith(DECODER) and not key[len(DECODER) :].startswith(ANCHOR):
            out["decoder_model." + key[len(DECODER) :]] = value
    return out


class MageVAE(VAEModel):
    @torch.no_grad()
    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        pixels = crop_to_multiple(pixels, self.downscale)[..., :3]
        return self.module.dconv_encoder(pixels.movedim(-1, 1).float() * 2.0 - 1.0)

    @torch.no_grad()
    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        if latent.dim() == 5 and latent.shape[2] == 1:
            latent = latent[:, :, 0]
        if latent.dim() != 4 or latent.shape[1] != self.latent_channels:
            raise ValueError(f"the Mage-VAE takes [B,{self.latent_channels},h,w] latents, got {tuple(latent.shape)}")
        x = self.module.decoder_model(latent.float())
        return ((x + 1.0) / 2.0).clamp(0.0, 1.0).movedim(1, -1)


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> MageVAE:
    """Mage-Flow's VAE from its published file, computing in float32 as ComfyUI's VAE does on a CPU."""
    path = ref.sources[0] if ref.sources else None
    if MAGE_VAE_MARKER not in state_dict:
        raise ModelLoadError(path, f"no Mage-VAE weights ({MAGE_VAE_MARKER}) in the file")
    sd = to_module_layout(state_dict)
    try:
        module = build_module(lambda: MageVAENetwork(sd), sd, path, "Mage-VAE")
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Mage-VAE: {e}") from None
    encoder: MageEncoder = module.dconv_encoder
    return MageVAE(arch="mage_flow", module=module.eval(), latent_channels=encoder.z_channels, downscale=encoder.patch)
