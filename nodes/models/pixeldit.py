"""PixelDiT (NVIDIA's PixelDiT-1300M-1024px; Comfy-Org/PixelDiT's pixeldit_1300m_1024px_bf16): a text-to-image
transformer in pixel space, written here from its definition (diffusers has no PixelDiT). Two levels:

- patch level: the image's 16x16 patches (unfolded, channel-major) and the Gemma 2 text states (projected,
  RMS-normed, plus a learned position table) run through MMDiT blocks: separate q/k/v, q/k RMS norms, adaLN and
  SwiGLU MLPs per stream, one joint attention over [text, image] with a 2D RoPE on the patches (x/y frequencies
  interleaved, positions spread over 0..16) and a 1D RoPE on the text; all modulations from silu(t_emb);
- pixel level: every pixel embedded (Linear of its RGB plus a 2D sin/cos position code over the whole image),
  grouped per patch; PiT blocks modulate each pixel from silu(t_emb + patch state), compress a patch's pixels into
  one token for a 2D-RoPE self-attention across patches, expand back, then a GELU MLP; an RMS-normed linear gives
  RGB and the patches fold back into the image.

The timestep embedding uses max period 10 (not 10000) on timesteps in [0, 1000]. Sizes come from the file's
shapes; heads cannot be told from shapes when q/k norms are per head, so the head width is the norms' width.
Detected as the newest ComfyUI's model_detection does: `core.pixel_embedder.proj.weight` (the published files
keep NVIDIA's training names under `core.`, or `net.`), here also the bare names, with `y_pos_embedding` beside;
PiD (the same body with `lq_proj.`) is refused by name. The published files fuse each PiT block's two adaLN
projections as `adaLN_modulation.0` [P*P, 6, pixel width]; they are split into the msa and mlp halves on load as
ComfyUI's supported_models.PixelDiTT2I does (EMA and REPA-projector weights are dropped). Latents are the pixels
(the pixel_space VAE); sampling is ComfyUI's FLOW at shift 4."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from cluster.refs import ModelRef
from nodes.arch import CHROMA_RADIANCE_LATENT
from nodes.models.components import DiffusionModel
from nodes.models.errors import ModelLoadError
from nodes.models.flux import per_batch
from nodes.models.flux_keys import find_prefix, strip_prefix

MARKER = "pixel_embedder.proj.weight"
FUSED = ".adaLN_modulation.0."
PID_MARKER = "lq_proj.latent_proj.0.weight"
SAMPLING = {"kind": "flow", "shift": 4.0, "multiplier": 1000.0}
EPS = 1e-6
TEXT_ROPE_THETA = 10000.0
T_MAX_PERIOD = 10.0
T_FREQ = 256


def is_pixeldit_state_dict(keys: Iterable[str]) -> bool:
    keys = set(keys)
    p = find_prefix(keys, MARKER)
    return p is not None and p + "y_pos_embedding" in keys


Rotation = tuple[torch.Tensor, torch.Tensor]  # (cos, sin) [N, D/2] of each consecutive pair's angle


def _rotate(x: torch.Tensor, rot: Rotation) -> torch.Tensor:
    """Rotate consecutive pairs of x [B, H, N, D]."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    cos, sin = rot
    a, b = pairs[..., 0], pairs[..., 1]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).reshape(x.shape).type_as(x)


def _angles(pos: torch.Tensor, dim: int, theta: float) -> torch.Tensor:
    """[N, dim/2] angles of float32 positions, in float64 (as Flux's rope computes them)."""
    omega = 1.0 / theta ** torch.linspace(0, (dim - 2) / dim, dim // 2, dtype=torch.float64)
    return torch.outer(pos.float().double(), omega)


def _cos_sin(angles: torch.Tensor, device: torch.device) -> Rotation:
    return angles.cos().float().to(device), angles.sin().float().to(device)


def rotation_2d(dim: int, height: int, width: int, device: torch.device, scale: float = 16.0) -> Rotation:
    """x and y positions spread over 0..scale, each axis rotating dim/4 pairs, the axes' pairs interleaved."""
    ys, xs = torch.meshgrid(torch.linspace(0, scale, height), torch.linspace(0, scale, width), indexing="ij")
    x_ang, y_ang = _angles(xs.reshape(-1), dim // 2, 10000.0), _angles(ys.reshape(-1), dim // 2, 10000.0)
    return _cos_sin(torch.stack([x_ang, y_ang], dim=-1).reshape(height * width, -1), device)


def rotation_1d(dim: int, length: int, device: torch.device) -> Rotation:
    return _cos_sin(_angles(torch.arange(length), dim, TEXT_ROPE_THETA), device)


def sincos_2d(dim: int, height: int, width: int) -> torch.Tensor:
    """[H*W, dim] MAE-style absolute code: sin/cos of the column, then sin/cos of the row."""
    ys, xs = torch.meshgrid(torch.arange(height).float(), torch.arange(width).float(), indexing="ij")
    omega = 1.0 / 10000.0 ** (torch.arange(dim // 4, dtype=torch.float32) / (dim / 4.0))
    w, h = torch.outer(xs.reshape(-1), omega), torch.outer(ys.reshape(-1), omega)
    return torch.cat([w.sin(), w.cos(), h.sin(), h.cos()], dim=1)


def timestep_embedding(t: torch.Tensor, dim: int = T_FREQ, max_period: float = T_MAX_PERIOD) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half).to(t.device)
    args = t[:, None].float() * freqs[None]
    return torch.cat([args.cos(), args.sin()], dim=-1)


def modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x + x * scale + shift


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """[B, H, N, D] -> [B, N, H*D]."""
    out = F.scaled_dot_product_attention(q, k, v)
    return out.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)


class LlamaSwiGLU(nn.Module):
    """A SwiGLU MLP with Llama's weight names (w1 gate, w3 up, w2 down)."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class JointAttention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, head = heads, dim // heads
        self.qkv_x = nn.Linear(dim, 3 * dim, bias=False)
        self.qkv_y = nn.Linear(dim, 3 * dim, bias=False)
        for name in ("q_norm_x", "k_norm_x", "q_norm_y", "k_norm_y"):
            setattr(self, name, nn.RMSNorm(head, eps=EPS))
        self.proj_x = nn.Linear(dim, dim)
        self.proj_y = nn.Linear(dim, dim)

    def _qkv(self, linear: nn.Linear, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        b, n, _ = x.shape
        return linear(x).reshape(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4).unbind(0)

    def forward(self, x: torch.Tensor, y: torch.Tensor, rot_x: torch.Tensor, rot_y: torch.Tensor) -> tuple:
        qx, kx, vx = self._qkv(self.qkv_x, x)
        qy, ky, vy = self._qkv(self.qkv_y, y)
        qx, kx = _rotate(self.q_norm_x(qx), rot_x), _rotate(self.k_norm_x(kx), rot_x)
        qy, ky = _rotate(self.q_norm_y(qy), rot_y), _rotate(self.k_norm_y(ky), rot_y)
        out = attention(torch.cat([qy, qx], 2), torch.cat([ky, kx], 2), torch.cat([vy, vx], 2))
        ny = y.shape[1]
        return self.proj_x(out[:, ny:]), self.proj_y(out[:, :ny])


class PatchBlock(nn.Module):
    """One MMDiT block: image (x) and text (y) streams, each with its own norms, adaLN and SwiGLU MLP."""

    def __init__(self, dim: int, heads: int, mlp_hidden: int) -> None:
        super().__init__()
        for name in ("norm_x1", "norm_y1", "norm_x2", "norm_y2"):
            setattr(self, name, nn.RMSNorm(dim, eps=EPS))
        self.attn = JointAttention(dim, heads)
        self.mlp_x = LlamaSwiGLU(dim, mlp_hidden)
        self.mlp_y = LlamaSwiGLU(dim, mlp_hidden)
        self.adaLN_modulation_img = nn.Sequential(nn.Linear(dim, 6 * dim))
        self.adaLN_modulation_txt = nn.Sequential(nn.Linear(dim, 6 * dim))

    def forward(self, x, y, c, rot_x, rot_y) -> tuple[torch.Tensor, torch.Tensor]:
        sx, cx, gx, sx2, cx2, gx2 = self.adaLN_modulation_img(c).chunk(6, dim=-1)
        sy, cy, gy, sy2, cy2, gy2 = self.adaLN_modulation_txt(c).chunk(6, dim=-1)
        ax, ay = self.attn(modulate(self.norm_x1(x), sx, cx), modulate(self.norm_y1(y), sy, cy), rot_x, rot_y)
        x, y = x + gx * ax, y + gy * ay
        x = x + gx2 * self.mlp_x(modulate(self.norm_x2(x), sx2, cx2))
        y = y + gy2 * self.mlp_y(modulate(self.norm_y2(y), sy2, cy2))
        return x, y


class PixelAttention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, head = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.q_norm = nn.RMSNorm(head, eps=EPS)
        self.k_norm = nn.RMSNorm(head, eps=EPS)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, rot: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        return self.proj(attention(_rotate(self.q_norm(q), rot), _rotate(self.k_norm(k), rot), v))


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))  # exact GELU (the block's default activation)


class PixelBlock(nn.Module):
    """PiT block: per-pixel adaLN from the patch state, attention over patches through one compressed token each."""

    def __init__(self, pixel_dim: int, patch_dim: int, p2: int, attn_dim: int, heads: int) -> None:
        super().__init__()
        self.pixel_dim, self.attn_dim, self.heads = pixel_dim, attn_dim, heads
        self.compress_to_attn = nn.Linear(p2 * pixel_dim, attn_dim)
        self.expand_from_attn = nn.Linear(attn_dim, p2 * pixel_dim)
        self.norm1 = nn.RMSNorm(pixel_dim, eps=EPS)
        self.attn = PixelAttention(attn_dim, heads)
        self.norm2 = nn.RMSNorm(pixel_dim, eps=EPS)
        self.mlp = Mlp(pixel_dim, 4 * pixel_dim)
        self.adaLN_modulation_msa = nn.Linear(patch_dim, 3 * pixel_dim * p2)
        self.adaLN_modulation_mlp = nn.Linear(patch_dim, 3 * pixel_dim * p2)

    def forward(self, x: torch.Tensor, s: torch.Tensor, b: int, rot: torch.Tensor) -> torch.Tensor:
        bl, p2, _ = x.shape
        shift, scale, gate = self.adaLN_modulation_msa(s).view(bl, p2, -1).chunk(3, dim=-1)
        tokens = self.compress_to_attn(modulate(self.norm1(x), shift, scale).reshape(bl, -1))
        attn = self.attn(tokens.view(b, bl // b, self.attn_dim), rot)
        x = x + gate * self.expand_from_attn(attn.reshape(bl, self.attn_dim)).view(bl, p2, self.pixel_dim)
        shift, scale, gate = self.adaLN_modulation_mlp(s).view(bl, p2, -1).chunk(3, dim=-1)
        return x + gate * self.mlp(modulate(self.norm2(x), shift, scale))


class Embedder(nn.Module):
    def __init__(self, d_in: int, d_out: int, norm: bool = False) -> None:
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)
        self.norm = nn.RMSNorm(d_out, eps=EPS) if norm else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.proj(x))


class PixelDiTTimestepEmbedder(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(T_FREQ, dim), nn.SiLU(), nn.Linear(dim, dim))

    def forward(self, t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return self.mlp(timestep_embedding(t).to(dtype))


class PixelDiTNetwork(nn.Module):
    def __init__(self, c: Mapping[str, int]) -> None:
        super().__init__()
        self.c = dict(c)
        dim, p, ch = c["hidden"], c["patch"], c["channels"]
        self.pixel_embedder = Embedder(ch, c["pixel_hidden"])
        self.s_embedder = Embedder(ch * p * p, dim)
        self.t_embedder = PixelDiTTimestepEmbedder(dim)
        self.y_embedder = Embedder(c["text_dim"], dim, norm=True)
        self.y_pos_embedding = nn.Parameter(torch.zeros(1, c["text_len"], dim))
        self.patch_blocks = nn.ModuleList(PatchBlock(dim, c["heads"], c["mlp_hidden"]) for _ in range(c["patch_depth"]))
        self.pixel_blocks = nn.ModuleList(
            PixelBlock(c["pixel_hidden"], dim, p * p, c["pixel_attn"], c["pixel_heads"])
            for _ in range(c["pixel_depth"])
        )
        self.final_layer = nn.Module()
        self.final_layer.norm = nn.RMSNorm(c["pixel_hidden"], eps=EPS)
        self.final_layer.linear = nn.Linear(c["pixel_hidden"], ch)

    def forward(self, x: torch.Tensor, t: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        c = self.c
        b, ch, h, w = x.shape
        p, dim = c["patch"], c["hidden"]
        hs, ws = h // p, w // p
        t_emb = self.t_embedder(t, x.dtype).view(b, 1, dim)
        n_txt = min(context.shape[1], c["text_len"])
        y = self.y_embedder(context[:, :n_txt]) + self.y_pos_embedding[:, :n_txt].to(x.dtype)
        cond = F.silu(t_emb)
        rot_img = rotation_2d(dim // c["heads"], hs, ws, x.device)
        rot_txt = rotation_1d(dim // c["heads"], n_txt, x.device)
        s = self.s_embedder(F.unfold(x, kernel_size=p, stride=p).transpose(1, 2))
        for block in self.patch_blocks:
            s, y = block(s, y, cond, rot_img, rot_txt)
        s = F.silu(t_emb + s).reshape(b * hs * ws, dim)
        # pixels: embedded with their absolute code, grouped per patch [B*L, P*P, pixel_hidden]
        px = self.pixel_embedder(x.permute(0, 2, 3, 1))
        px = px + sincos_2d(c["pixel_hidden"], h, w).to(px).view(h, w, -1)
        px = px.view(b, hs, p, ws, p, -1).permute(0, 1, 3, 2, 4, 5).reshape(b * hs * ws, p * p, -1)
        rot_pix = rotation_2d(c["pixel_attn"] // c["pixel_heads"], hs, ws, x.device)
        for block in self.pixel_blocks:
            px = block(px, s, b, rot_pix)
        px = self.final_layer.linear(self.final_layer.norm(px))
        px = px.view(b, hs * ws, p * p, ch).permute(0, 3, 2, 1).reshape(b, ch * p * p, hs * ws)
        return F.fold(px, (h, w), kernel_size=p, stride=p)


def split_fused_modulation(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The published layout's fused PiT adaLN (`pixel_blocks.N.adaLN_modulation.0.*`, rows [P*P, 6, width]) as
    the msa (chunks 0-2) and mlp (3-5) projections; EMA / REPA-projector weights dropped."""
    width = sd["pixel_embedder.proj.weight"].shape[0]
    out: dict[str, torch.Tensor] = {}
    for k, v in sd.items():
        if k.startswith(("_repa_projector", "net_ema.")):
            continue
        if not (k.startswith("pixel_blocks.") and FUSED in k):
            out[k] = v
            continue
        base, suffix = k.split(FUSED)
        rows = v.view(v.shape[0] // (6 * width), 6, width, *v.shape[1:])
        for name, part in (("msa", rows[:, :3]), ("mlp", rows[:, 3:])):
            out[f"{base}.adaLN_modulation_{name}.{suffix}"] = part.reshape(-1, *v.shape[1:]).contiguous()
    return out


def network_config(sd: Mapping[str, torch.Tensor]) -> dict[str, int]:
    """Sizes from the (unprefixed) shapes."""
    dim, patch_in = sd["s_embedder.proj.weight"].shape
    pixel_hidden, channels = sd["pixel_embedder.proj.weight"].shape
    head = sd["patch_blocks.0.attn.q_norm_x.weight"].shape[0]
    pixel_attn = sd["pixel_blocks.0.compress_to_attn.weight"].shape[0]
    pixel_head = sd["pixel_blocks.0.attn.q_norm.weight"].shape[0]
    patch = math.isqrt(patch_in // channels)
    if patch * patch * channels != patch_in:
        raise ValueError(f"s_embedder takes {patch_in} inputs, not {channels} channels of a square patch")

    def depth(name: str) -> int:
        return len({int(m.group(1)) for k in sd if (m := re.match(rf"{name}\.(\d+)\.", k))})

    return {
        "channels": int(channels),
        "hidden": int(dim),
        "heads": int(dim // head),
        "mlp_hidden": int(sd["patch_blocks.0.mlp_x.w1.weight"].shape[0]),
        "patch": patch,
        "pixel_hidden": int(pixel_hidden),
        "pixel_attn": int(pixel_attn),
        "pixel_heads": int(pixel_attn // pixel_head),
        "patch_depth": depth("patch_blocks"),
        "pixel_depth": depth("pixel_blocks"),
        "text_dim": int(sd["y_embedder.proj.weight"].shape[1]),
        "text_len": int(sd["y_pos_embedding"].shape[1]),
    }


@dataclass
class PixelDiTDiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        for key, what in (
            ("control", "ControlNets"),
            ("concat", "concat conditioning"),
            ("ref_latents", "reference latents"),
            ("rope_options", "ScaleROPE"),
        ):
            if cond.get(key):
                raise NotImplementedError(f"{what} is not supported for PixelDiT models yet")
        b, _, h, w = x.shape
        p = self.config["patch"]
        img = F.pad(x, (0, (-w) % p, 0, (-h) % p), mode="circular")  # ComfyUI's pad_to_patch_size, then cropped
        context = cond["context"].to(x.device, self.dtype)
        out = self.module(img.to(self.dtype), per_batch(timestep, b, x.device), context)
        return out[:, :, :h, :w].float()


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> PixelDiTDiffusionModel:
    """A PixelDiT DiffusionModel from a state dict in ComfyUI's layout (any prefix)."""
    from nodes.models.safetensors_io import build_module

    path = ref.sources[0] if ref.sources else None
    p = find_prefix(state_dict.keys(), MARKER)
    if p is None:
        raise ModelLoadError(path, f"not a PixelDiT transformer (no {MARKER})")
    sd = split_fused_modulation(strip_prefix(state_dict, p))
    if PID_MARKER in sd:
        raise ModelLoadError(path, "PiD (PixelDiT's pixel diffusion decoder, lq_proj) is not supported yet")
    try:
        config = network_config(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable PixelDiT transformer: {e}") from None
    dtype = sd["s_embedder.proj.weight"].dtype
    if not dtype.is_floating_point or dtype.itemsize < 2:
        dtype = torch.bfloat16
    sd = {k: v.to(dtype) if v.is_floating_point() else v for k, v in sd.items()}
    module = build_module(lambda: PixelDiTNetwork(config), sd, path, "PixelDiT transformer", dtype=dtype)
    return PixelDiTDiffusionModel(
        arch="pixeldit",
        module=module,
        latent_format=CHROMA_RADIANCE_LATENT,
        sampling=dict(SAMPLING),
        config=config,
        dtype=dtype,
    )


from nodes.models.pixeldit_text import load_text_encoder  # noqa: E402

__all__ = ["is_pixeldit_state_dict", "load_diffusion_model", "load_text_encoder"]
