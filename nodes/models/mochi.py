"""Genmo Mochi 1 preview's diffusion model (diffusion_models/mochi_preview_bf16.safetensors): an asymmetric joint
DiT on 12-channel video latents (1/8 of the frame, 1/6 of the frames), the visual stream wide, the T5-XXL stream
narrow, both attending together in each block.

Detection: ComfyUI 0.3.64's model_detection rule (a `t5_yproj.weight`, image_model "mochi_preview"). ComfyUI fixes
the released sizes there; here every size is read from the tensors (so the tiny demo file loads too): the visual and
text widths, the patch, the depth, the heads (`pos_frequencies` [3, heads, head_dim / 2]) and both feed-forward
widths. The caption pool has 8 heads, as Genmo's code fixes.

The network is our own module under Genmo's published names (the file loads as is), computing as ComfyUI 0.3.64's
comfy/ldm/genmo/joint_model does: the timestep embedded from 1 - sigma at scale 1000 plus the attention-pooled
caption, per-block RMS-norm modulation with tanh gates (the last block leaves the text alone), learned 3-D rotary
frequencies over positions scaled to a fixed area, the text tokens cut to the prompt's count (the mask's sum, at
least 1) in the joint attention and zeros put back after, and the prediction negated. Sampling: FLOW at shift 6
with multiplier 1 (the timestep is sigma); the Mochi latent format (per-channel mean and std).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models.components import DiffusionModel
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.fp8 import dequantize_scaled_fp8
from nodes.models.lora import LoraTargets
from nodes.models.single_file import load_single_file_transformer

MARKER = "t5_yproj.weight"
POOL_HEADS = 8  # Genmo's AttentionPool
FREQ_DIM = 256  # the timestep's sinusoidal width
TIMESTEP_SCALE = 1000.0
TARGET_AREA = 36864.0  # positions are spread as if the frame had this many patches (posenc_preserve_area)


@dataclass(frozen=True)
class MochiConfig:
    in_channels: int
    out_channels: int
    patch: int
    hidden_x: int
    hidden_y: int
    heads: int
    depth: int
    mlp_x: int
    mlp_y: int
    t5_dim: int


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    embed = sd["x_embedder.proj.weight"]
    hidden_x, patch = int(embed.shape[0]), int(embed.shape[2])
    heads = int(sd["pos_frequencies"].shape[1])
    if hidden_x % heads or int(sd["pos_frequencies"].shape[2]) * 2 != hidden_x // heads:
        raise ValueError(f"pos_frequencies {tuple(sd['pos_frequencies'].shape)} do not fit the width {hidden_x}")
    t5_dim = int(sd["t5_yproj.weight"].shape[1])
    if t5_dim % POOL_HEADS:
        raise ValueError(f"text width {t5_dim} is not a multiple of the caption pool's {POOL_HEADS} heads")
    return {
        "in_channels": int(embed.shape[1]),
        "out_channels": int(sd["final_layer.linear.weight"].shape[0]) // (patch * patch),
        "patch": patch,
        "hidden_x": hidden_x,
        "hidden_y": int(sd["t5_yproj.weight"].shape[0]),
        "heads": heads,
        "depth": count_blocks(sd, "blocks"),
        "mlp_x": int(sd["blocks.0.mlp_x.w2.weight"].shape[1]),
        "mlp_y": int(sd["blocks.0.mlp_y.w2.weight"].shape[1]),
        "t5_dim": t5_dim,
    }


def rms(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def gated_add(x: torch.Tensor, res: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """x + rms(res) * tanh(gate): Genmo's sandwich norm."""
    return x + rms(res) * torch.tanh(gate).unsqueeze(1)


def timestep_embedding(t: torch.Tensor, dim: int = FREQ_DIM, period: float = 10000.0) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(period) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


def positions(t: int, ph: int, pw: int, device: torch.device) -> torch.Tensor:
    """[t*ph*pw, 3]: frame index, then row and column at bin centres spread over TARGET_AREA patches."""
    scale = math.sqrt(TARGET_AREA / (pw * ph))

    def centres(n: int) -> torch.Tensor:
        edges = torch.linspace(-n * scale / 2, n * scale / 2, n + 1)
        return (edges[:-1] + edges[1:]) / 2

    grid = torch.meshgrid(torch.arange(t, dtype=torch.float32), centres(ph), centres(pw), indexing="ij")
    return torch.stack(grid, dim=-1).reshape(-1, 3).to(device)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary turn of interleaved pairs; x [B,N,H,D], cos/sin [N,H,D/2]."""
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2).type_as(x)


class MochiFeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, 2 * hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, gate = self.w1(x).chunk(2, dim=-1)
        return self.w2(F.silu(a) * gate)


class HeadNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms(x, 1e-5) * self.weight


class MochiAttention(nn.Module):
    def __init__(self, c: MochiConfig, update_y: bool):
        super().__init__()
        self.heads = c.heads
        head = c.hidden_x // c.heads
        self.qkv_x = nn.Linear(c.hidden_x, 3 * c.hidden_x, bias=False)
        self.qkv_y = nn.Linear(c.hidden_y, 3 * c.hidden_x, bias=False)
        self.q_norm_x, self.k_norm_x, self.q_norm_y, self.k_norm_y = (HeadNorm(head) for _ in range(4))
        self.proj_x = nn.Linear(c.hidden_x, c.hidden_x)
        self.proj_y = nn.Linear(c.hidden_x, c.hidden_y) if update_y else None

    def forward(self, x, y, scale_x, scale_y, cos, sin, n_text: int):
        x = rms(x) * (1 + scale_x.unsqueeze(1))
        y = rms(y) * (1 + scale_y.unsqueeze(1))
        b, n, _ = x.shape
        q_y, k_y, v_y = self.qkv_y(y).view(b, y.shape[1], 3, self.heads, -1).unbind(2)
        q_y, k_y = self.q_norm_y(q_y), self.k_norm_y(k_y)
        q_x, k_x, v_x = self.qkv_x(x).view(b, n, 3, self.heads, -1).unbind(2)
        q_x = rotate(self.q_norm_x(q_x), cos, sin)
        k_x = rotate(self.k_norm_x(k_x), cos, sin)
        q, k, v = (
            torch.cat([a, t[:, :n_text]], dim=1).transpose(1, 2) for a, t in ((q_x, q_y), (k_x, k_y), (v_x, v_y))
        )
        out = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, q.shape[2], -1)
        x_out = self.proj_x(out[:, :n])
        if self.proj_y is None:
            return x_out, None
        y_out = out.new_zeros(b, y.shape[1], out.shape[-1])
        y_out[:, : out.shape[1] - n] = out[:, n:]  # the cut padding tokens come back as zeros (then proj_y's bias)
        return x_out, self.proj_y(y_out)


class MochiBlock(nn.Module):
    def __init__(self, c: MochiConfig, update_y: bool):
        super().__init__()
        self.update_y = update_y
        self.mod_x = nn.Linear(c.hidden_x, 4 * c.hidden_x)
        self.mod_y = nn.Linear(c.hidden_x, (4 if update_y else 1) * c.hidden_y)
        self.attn = MochiAttention(c, update_y)
        self.mlp_x = MochiFeedForward(c.hidden_x, c.mlp_x)
        if update_y:
            self.mlp_y = MochiFeedForward(c.hidden_y, c.mlp_y)

    def forward(self, x, c, y, cos, sin, n_text: int):
        c = F.silu(c)
        scale_msa_x, gate_msa_x, scale_mlp_x, gate_mlp_x = self.mod_x(c).chunk(4, dim=1)
        mod_y = self.mod_y(c)
        scale_msa_y = mod_y.chunk(4, dim=1)[0] if self.update_y else mod_y
        x_attn, y_attn = self.attn(x, y, scale_msa_x, scale_msa_y, cos, sin, n_text)
        x = gated_add(x, x_attn, gate_msa_x)
        x = gated_add(x, self.mlp_x(rms(x) * (1 + scale_mlp_x.unsqueeze(1))), gate_mlp_x)
        if self.update_y:
            _, gate_msa_y, scale_mlp_y, gate_mlp_y = mod_y.chunk(4, dim=1)
            y = gated_add(y, y_attn, gate_msa_y)
            y = gated_add(y, self.mlp_y(rms(y) * (1 + scale_mlp_y.unsqueeze(1))), gate_mlp_y)
        return x, y


class MochiPatchEmbed(nn.Module):
    def __init__(self, c: MochiConfig):
        super().__init__()
        self.proj = nn.Conv2d(c.in_channels, c.hidden_x, c.patch, stride=c.patch)


class MochiTimestepEmbedder(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(FREQ_DIM, dim), nn.SiLU(), nn.Linear(dim, dim))


class MochiAttentionPool(nn.Module):
    """The caption's pooled vector: the mask-weighted mean token queries the tokens (and itself)."""

    def __init__(self, dim: int, out: int):
        super().__init__()
        self.to_kv = nn.Linear(dim, 2 * dim)
        self.to_q = nn.Linear(dim, dim)
        self.to_out = nn.Linear(dim, out)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, _, d = x.shape
        weights = mask[:, :, None].to(x.dtype)
        weights = weights / weights.sum(dim=1, keepdim=True).clamp(min=1)
        x = torch.cat([(x * weights).sum(dim=1, keepdim=True), x], dim=1)
        attend = F.pad(mask.bool(), (1, 0), value=True)[:, None, None, :]
        kv = self.to_kv(x).unflatten(2, (2, POOL_HEADS, d // POOL_HEADS)).transpose(1, 3)
        k, v = kv.unbind(2)
        q = self.to_q(x[:, 0]).unflatten(1, (POOL_HEADS, d // POOL_HEADS)).unsqueeze(2)
        return self.to_out(F.scaled_dot_product_attention(q, k, v, attn_mask=attend).flatten(1))


class MochiFinalLayer(nn.Module):
    def __init__(self, c: MochiConfig):
        super().__init__()
        self.mod = nn.Linear(c.hidden_x, 2 * c.hidden_x)
        self.linear = nn.Linear(c.hidden_x, c.patch * c.patch * c.out_channels)

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        shift, scale = self.mod(F.silu(c)).chunk(2, dim=1)
        x = F.layer_norm(x, x.shape[-1:], eps=1e-6) * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)
        return self.linear(x)


class MochiNetwork(nn.Module):
    def __init__(self, config: MochiConfig):
        super().__init__()
        c = self.config = config
        self.x_embedder = MochiPatchEmbed(c)
        self.t_embedder = MochiTimestepEmbedder(c.hidden_x)
        self.t5_y_embedder = MochiAttentionPool(c.t5_dim, c.hidden_x)
        self.t5_yproj = nn.Linear(c.t5_dim, c.hidden_y)
        self.pos_frequencies = nn.Parameter(torch.zeros(3, c.heads, c.hidden_x // c.heads // 2))
        self.blocks = nn.ModuleList(MochiBlock(c, i < c.depth - 1) for i in range(c.depth))
        self.final_layer = MochiFinalLayer(c)

    def forward(self, x: torch.Tensor, sigma: torch.Tensor, context: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x [B,C,T,H,W] at `sigma` [B]; context [B,L,t5_dim] with its mask [B,L] (1 = a prompt token)."""
        c = self.config
        b, _, t, h, w = x.shape
        p = c.patch
        if h % p or w % p:
            raise ValueError(f"the latent's size {h}x{w} is not a multiple of the patch {p}")
        ph, pw = h // p, w // p
        frames = x.permute(0, 2, 1, 3, 4).reshape(b * t, -1, h, w)
        tokens = self.x_embedder.proj(frames).flatten(2).transpose(1, 2).reshape(b, t * ph * pw, -1)
        pos = positions(t, ph, pw, x.device)
        angles = torch.einsum("nd,dhf->nhf", pos.to(tokens.dtype), self.pos_frequencies.to(tokens.dtype))
        cos, sin = torch.cos(angles), torch.sin(angles)
        t_emb = self.t_embedder.mlp(timestep_embedding((1 - sigma) * TIMESTEP_SCALE).to(tokens.dtype))
        vec = t_emb + self.t5_y_embedder(context, mask)
        y = self.t5_yproj(context)
        n_text = max(1, int(mask.sum().item()))  # ComfyUI's num_tokens: the whole batch's mask sum, at least 1
        for block in self.blocks:
            tokens, y = block(tokens, vec, y, cos, sin, n_text)
        out = self.final_layer(tokens, vec)
        out = out.reshape(b, t, ph, pw, p, p, c.out_channels).permute(0, 6, 1, 2, 4, 3, 5)
        return -out.reshape(b, c.out_channels, t, h, w)


def layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The file's tensors in Genmo's names, unprefixed (bare or under `model.diffusion_model.`); a scaled-fp8 file
    (mochi_preview_fp8_scaled) multiplied out as ComfyUI 0.3.64 computes it."""
    prefix = find_prefix(state_dict.keys(), MARKER)
    if prefix is None:
        raise ValueError(f"not a Mochi state dict (no {MARKER})")
    return strip_prefix(dequantize_scaled_fp8(state_dict), prefix)


def lora_targets(sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    targets = LoraTargets(("diffusion_model.", "lora_unet_") + tuple(sorted({k.split(".")[0] + "." for k in sd})), {})
    for key, value in sd.items():
        if key.endswith(".weight") and value.dim() == 2:
            name = key[: -len(".weight")]
            # ComfyUI 0.3.64's names for Mochi: the official bare ones, diffusion_model.-prefixed, kohya's lora_unet_
            targets.add(key, name, "diffusion_model." + name, "lora_unet_" + name.replace(".", "_"))
    return targets


@dataclass
class MochiDiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        for key, what in (("control", "ControlNets"), ("ref_latents", "reference latents (ReferenceLatent)")):
            if cond.get(key):
                raise NotImplementedError(f"{what} are not supported for Mochi models")
        if cond.get("concat") is not None:
            raise NotImplementedError("Mochi takes no concat channels")
        if x.dim() != 5:
            raise ValueError(f"Mochi takes [B,12,T,H,W] latents; this one is {tuple(x.shape)}")
        b = x.shape[0]
        context = cond["context"].to(x.device, self.dtype)
        context = context.expand(b, *context.shape[1:]) if context.shape[0] == 1 and b > 1 else context
        mask = cond.get("attention_mask")
        if mask is None:
            mask = torch.ones(context.shape[:2], dtype=torch.long)
        mask = mask.to(x.device).reshape(-1, context.shape[1])
        mask = mask.expand(b, -1) if mask.shape[0] == 1 and b > 1 else mask
        sigma = torch.as_tensor(timestep, dtype=torch.float32, device=x.device).reshape(-1)
        sigma = sigma.expand(b) if sigma.numel() == 1 else sigma
        # ComfyUI runs prompts with different token counts in separate passes (num_tokens is a CONDConstant); rows
        # are run one by one so that each is cut to its own count
        rows = [
            self.module(x[i : i + 1].to(self.dtype), sigma[i : i + 1], context[i : i + 1], mask[i : i + 1])
            for i in range(b)
        ]
        return torch.cat(rows).float()


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> MochiDiffusionModel:
    """A Mochi 1 preview DiffusionModel from Genmo's (ComfyUI's) file layout."""
    module, config = load_single_file_transformer(
        ref,
        state_dict,
        what="Mochi transformer",
        layout=layout,
        lora_targets=lora_targets,
        convert=dict,
        infer_config=infer_config,
        model_class=lambda **c: MochiNetwork(MochiConfig(**c)),
    )
    return MochiDiffusionModel(
        arch="mochi",
        module=module,
        latent_format=latent_format("mochi"),
        sampling=dict(sampling_config("mochi")),
        config=config,
        dtype=next(module.parameters()).dtype,
    )


# The loader (nodes.models.loader) finds the text encoder's entry point on this module too.
from nodes.models.mochi_text import load_text_encoder  # noqa: E402, F401
