"""HunyuanDiT diffusion models (Tencent's HunyuanDiT v1.0 / v1.1 / v1.2; the all-in-one hunyuan_dit_1.2 checkpoint
ComfyUI's examples load): a DiT on SDXL's 4-channel latents whose blocks read the BERT encoder's states joined with
mT5-XL's (projected by `mlp_t5`), with a U-shaped long skip from the first half of the blocks into the second.

Detection (ComfyUI 0.3.64's model_detection): `mlp_t5.0.weight`; the width from `x_embedder.proj.weight`, the depth
by counting `blocks.N.`; a 3968-wide `extra_embedder.0.weight` input (1024 pooled + 6 x 256 image size + 1408 style)
is v1.0 ("hydit1", size and style conditions), anything else v1.1 / v1.2 ("hydit"). ComfyUI fixes 16 heads and the
text widths (1024, 2048) and lengths (77, 256): the head count is kept, the rest are read from the file's shapes
(they are ComfyUI's for every published file).

The module is our own, its parameter names the published ones; `forward` follows ComfyUI 0.3.64's
comfy/ldm/hydit/models.py call: the BERT states' last 77 and mT5's last 256 positions that the masks leave out are
replaced by learned padding, the timestep is ComfyUI's (0..999), the output's first 4 of 8 channels are the
v-prediction (learn_sigma)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models.components import DiffusionModel
from nodes.models.flux_keys import find_prefix, strip_prefix
from nodes.models.lora import LoraTargets
from nodes.models.single_file import load_single_file_transformer

MARKER = "mlp_t5.0.weight"
HEADS = 16  # ComfyUI's HunYuanDiT default; its detection never reads a head count
POOL_HEADS = 8
V10_EXTRA_WIDTH = 3968  # v1.0's extra_embedder input (ComfyUI's "hydit1" rule)
ROPE_BASE = 512 // 8  # the latent side the rotary grid is fitted to (ComfyUI's calc_rope), before patching
EPS = 1e-6


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """The network's sizes from an unprefixed state dict."""
    hidden, in_channels, patch, _ = sd["x_embedder.proj.weight"].shape
    depth = len({k.split(".")[1] for k in sd if k.startswith("blocks.")})
    text_len_t5 = sd["pooler.positional_embedding"].shape[0] - 1
    extra_width = sd["extra_embedder.0.weight"].shape[1]
    conditioned = extra_width == V10_EXTRA_WIDTH  # ComfyUI turns both on together, by this width alone
    return {
        "hidden": int(hidden),
        "depth": depth,
        "in_channels": int(in_channels),
        "patch": int(patch),
        "mlp_hidden": int(sd["blocks.0.mlp.fc1.weight"].shape[0]),
        "text_dim": int(sd["mlp_t5.2.weight"].shape[0]),
        "text_dim_t5": int(sd["mlp_t5.0.weight"].shape[1]),
        "text_len": int(sd["text_embedding_padding"].shape[0]) - int(text_len_t5),
        "text_len_t5": int(text_len_t5),
        "pooled_dim": int(sd["pooler.c_proj.weight"].shape[0]),
        "out_channels": int(sd["final_layer.linear.weight"].shape[0]) // (int(patch) ** 2),
        "size_cond": conditioned,
        "style_cond": conditioned,
    }


def sinusoid(t: torch.Tensor, dim: int) -> torch.Tensor:
    """[N] -> [N, dim] float32: cos then sin, max period 10000 (ComfyUI's timestep_embedding)."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


def rope_tables(th: int, tw: int, head_dim: int, patch: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) [th*tw, head_dim] of the 2-D rotary embedding: the token grid fitted into the base grid (32 x 32
    tokens at patch 2; resized to keep its aspect ratio, centred), half the pairs rotating with the column, half
    with the row."""
    base = ROPE_BASE // patch
    if th / tw > 1.0:  # taller than the square base: the full height, the width scaled
        rh, rw = base, int(round(base / th * tw))
    else:
        rw, rh = base, int(round(base / tw * th))
    top, left = int(round((base - rh) / 2.0)), int(round((base - rw) / 2.0))
    rows = np.linspace(top, top + rh, th, endpoint=False, dtype=np.float32)
    cols = np.linspace(left, left + rw, tw, endpoint=False, dtype=np.float32)
    col_grid, row_grid = np.meshgrid(cols, rows)  # [th, tw] each, the tokens' row-major order

    def axis(pos: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        dim = head_dim // 2
        freqs = 1.0 / (10000.0 ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
        angles = torch.outer(torch.from_numpy(pos.reshape(-1)), freqs).float()
        return angles.cos().repeat_interleave(2, dim=1), angles.sin().repeat_interleave(2, dim=1)

    (cos_c, sin_c), (cos_r, sin_r) = axis(col_grid), axis(row_grid)
    return torch.cat([cos_c, cos_r], dim=1), torch.cat([sin_c, sin_r], dim=1)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding on interleaved (even, odd) pairs of the last axis."""
    even, odd = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    turned = torch.stack([-odd, even], dim=-1).flatten(-2)
    return x * cos + turned * sin


class HunyuanDiTSelfAttention(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, width // heads
        self.Wqkv = nn.Linear(width, 3 * width)
        self.q_norm = nn.LayerNorm(self.head_dim, eps=EPS)
        self.k_norm = nn.LayerNorm(self.head_dim, eps=EPS)
        self.out_proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = self.Wqkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        q, k = rotate(self.q_norm(q), cos, sin), rotate(self.k_norm(k), cos, sin)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.out_proj(out.transpose(1, 2).reshape(b, n, -1))


class HunyuanDiTCrossAttention(nn.Module):
    def __init__(self, width: int, text_dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, width // heads
        self.q_proj = nn.Linear(width, width)
        self.kv_proj = nn.Linear(text_dim, 2 * width)
        self.q_norm = nn.LayerNorm(self.head_dim, eps=EPS)
        self.k_norm = nn.LayerNorm(self.head_dim, eps=EPS)
        self.out_proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor, text: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, self.heads, self.head_dim)
        k, v = self.kv_proj(text).view(b, text.shape[1], 2, self.heads, self.head_dim).unbind(2)
        q = rotate(self.q_norm(q), cos[:, None], sin[:, None])  # the image queries alone are rotated
        k = self.k_norm(k)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return self.out_proj(out.transpose(1, 2).reshape(b, n, -1))


class HunyuanDiTMlp(nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(width, hidden), nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class HunyuanDiTBlock(nn.Module):
    def __init__(self, c: dict[str, Any], skip: bool) -> None:
        super().__init__()
        w = c["hidden"]
        self.norm1 = nn.LayerNorm(w, eps=EPS)
        self.attn1 = HunyuanDiTSelfAttention(w, HEADS)
        self.norm2 = nn.LayerNorm(w, eps=EPS)
        self.mlp = HunyuanDiTMlp(w, c["mlp_hidden"])
        self.default_modulation = nn.Sequential(nn.SiLU(), nn.Linear(w, w))
        self.attn2 = HunyuanDiTCrossAttention(w, c["text_dim"], HEADS)
        self.norm3 = nn.LayerNorm(w, eps=EPS)
        if skip:
            self.skip_norm = nn.LayerNorm(2 * w, eps=EPS)
            self.skip_linear = nn.Linear(2 * w, w)
        else:
            self.skip_linear = None

    def forward(
        self, x: torch.Tensor, c: torch.Tensor, text: torch.Tensor, rope: tuple, skip: torch.Tensor | None
    ) -> torch.Tensor:
        if self.skip_linear is not None:
            x = self.skip_linear(self.skip_norm(torch.cat([x, skip], dim=-1)))
        x = x + self.attn1(self.norm1(x) + self.default_modulation(c).unsqueeze(1), *rope)
        x = x + self.attn2(self.norm3(x), text, *rope)
        return x + self.mlp(self.norm2(x))


class AttentionPool(nn.Module):
    """mT5's states (the first text_len_t5) pooled by one query, their mean, over 8 heads."""

    def __init__(self, length: int, width: int, out: int) -> None:
        super().__init__()
        self.positional_embedding = nn.Parameter(torch.zeros(length + 1, width))
        self.k_proj, self.q_proj, self.v_proj = (
            nn.Linear(width, width),
            nn.Linear(width, width),
            nn.Linear(width, width),
        )
        self.c_proj = nn.Linear(width, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x[:, : self.positional_embedding.shape[0] - 1]
        x = torch.cat([x.mean(dim=1, keepdim=True), x], dim=1) + self.positional_embedding.to(x.dtype)
        b, n, w = x.shape
        heads = lambda t: t.view(b, t.shape[1], POOL_HEADS, w // POOL_HEADS).transpose(1, 2)  # noqa: E731
        out = F.scaled_dot_product_attention(heads(self.q_proj(x[:, :1])), heads(self.k_proj(x)), heads(self.v_proj(x)))
        return self.c_proj(out.transpose(1, 2).reshape(b, w))


class HunyuanDiTPatchEmbed(nn.Module):
    def __init__(self, in_channels: int, width: int, patch: int) -> None:
        super().__init__()
        self.patch = patch
        self.proj = nn.Conv2d(in_channels, width, kernel_size=patch, stride=patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.patch
        pad_h, pad_w = (p - x.shape[-2] % p) % p, (p - x.shape[-1] % p) % p
        if pad_h or pad_w:  # ComfyUI pads an odd latent circularly to whole patches
            x = F.pad(x, (0, pad_w, 0, pad_h), mode="circular")
        return self.proj(x).flatten(2).transpose(1, 2)


class HunyuanDiTTimestepEmbedder(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(256, width), nn.SiLU(), nn.Linear(width, width))

    def forward(self, t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return self.mlp(sinusoid(t, 256).to(dtype))


class HunyuanDiTFinalLayer(nn.Module):
    def __init__(self, width: int, patch: int, out_channels: int) -> None:
        super().__init__()
        self.norm_final = nn.LayerNorm(width, elementwise_affine=False, eps=EPS)
        self.linear = nn.Linear(width, patch * patch * out_channels)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(width, 2 * width))

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=1)
        return self.linear(self.norm_final(x) * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1))


class HunyuanDiTNetwork(nn.Module):
    def __init__(self, **c: Any) -> None:
        super().__init__()
        self.config = c
        w, t5 = c["hidden"], c["text_dim_t5"]
        self.mlp_t5 = nn.Sequential(nn.Linear(t5, 4 * t5), nn.SiLU(), nn.Linear(4 * t5, c["text_dim"]))
        self.text_embedding_padding = nn.Parameter(torch.zeros(c["text_len"] + c["text_len_t5"], c["text_dim"]))
        self.pooler = AttentionPool(c["text_len_t5"], t5, c["pooled_dim"])
        extra = c["pooled_dim"] + (6 * 256 if c["size_cond"] else 0) + (w if c["style_cond"] else 0)
        if c["style_cond"]:
            self.style_embedder = nn.Embedding(1, w)
        self.x_embedder = HunyuanDiTPatchEmbed(c["in_channels"], w, c["patch"])
        self.t_embedder = HunyuanDiTTimestepEmbedder(w)
        self.extra_embedder = nn.Sequential(nn.Linear(extra, 4 * w), nn.SiLU(), nn.Linear(4 * w, w))
        depth = c["depth"]
        self.blocks = nn.ModuleList([HunyuanDiTBlock(c, skip=i > depth // 2) for i in range(depth)])
        self.final_layer = HunyuanDiTFinalLayer(w, c["patch"], c["out_channels"])

    def text_states(
        self, bert: torch.Tensor, bert_mask: torch.Tensor, t5: torch.Tensor, t5_mask: torch.Tensor
    ) -> torch.Tensor:
        """The cross-attention's text: BERT's states then mT5's projected ones, the masked-out positions among
        the last text_len / text_len_t5 of each replaced by the learned padding."""
        n, n5 = self.config["text_len"], self.config["text_len_t5"]
        pad = self.text_embedding_padding.to(bert.dtype)
        t5 = self.mlp_t5(t5)

        def padded(states: torch.Tensor, mask: torch.Tensor, length: int, fill: torch.Tensor) -> torch.Tensor:
            tail = torch.where(mask[:, -length:].bool().unsqueeze(2), states[:, -length:], fill)
            return torch.cat([states[:, :-length], tail], dim=1)

        return torch.cat([padded(bert, bert_mask, n, pad[:n]), padded(t5, t5_mask, n5, pad[n:])], dim=1)

    def forward(
        self,
        x: torch.Tensor,
        t: torch.Tensor,
        bert: torch.Tensor,
        bert_mask: torch.Tensor,
        t5: torch.Tensor,
        t5_mask: torch.Tensor,
        image_meta_size: torch.Tensor | None = None,
    ) -> torch.Tensor:
        c, p = self.config, self.config["patch"]
        _, _, oh, ow = x.shape
        th, tw = (oh + p // 2) // p, (ow + p // 2) // p
        text = self.text_states(bert, bert_mask, t5, t5_mask)
        cos, sin = (r.to(x) for r in rope_tables(th, tw, c["hidden"] // HEADS, p))
        temb = self.t_embedder(t, x.dtype)
        x = self.x_embedder(x)
        extra = self.pooler(t5)
        if c["size_cond"]:
            meta = image_meta_size if image_meta_size is not None else torch.zeros(x.shape[0], 6)
            extra = torch.cat([extra, sinusoid(meta.to(x.device).reshape(-1), 256).to(x.dtype).view(-1, 6 * 256)], 1)
        if c["style_cond"]:  # the one learned style
            style = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
            extra = torch.cat([extra, self.style_embedder(style).to(x.dtype)], dim=1)
        vec = temb + self.extra_embedder(extra)
        skips: list[torch.Tensor] = []
        depth = c["depth"]
        for i, block in enumerate(self.blocks):
            x = block(x, vec, text, (cos, sin), skips.pop() if i > depth // 2 else None)
            if i < depth // 2 - 1:
                skips.append(x)
        x = self.final_layer(x, vec)
        out = c["out_channels"]
        x = x.reshape(x.shape[0], th, tw, p, p, out).permute(0, 5, 1, 3, 2, 4).reshape(x.shape[0], out, th * p, tw * p)
        return x[:, : c["in_channels"], :oh, :ow]  # learn_sigma: the second half is the variance


def hunyuan_dit_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    prefix = find_prefix(state_dict.keys(), MARKER)
    if prefix is None:
        raise ValueError(f"not a HunyuanDiT state dict (no {MARKER})")
    return strip_prefix(state_dict, prefix)


def lora_targets(sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    """The names a HunyuanDiT LoRA gives a linear layer: bare, under `diffusion_model.` or kohya's `lora_unet_`."""
    targets = LoraTargets(("lora_unet_", "diffusion_model.") + tuple(sorted({k.split(".")[0] + "." for k in sd})), {})
    for key, value in sd.items():
        if key.endswith(".weight") and value.dim() == 2:
            name = key[: -len(".weight")]
            targets.add(key, name, "diffusion_model." + name, "lora_unet_" + name.replace(".", "_"))
    return targets


def _batched(t: torch.Tensor, b: int) -> torch.Tensor:
    return t.expand(b, *t.shape[1:]) if t.shape[0] == 1 and b > 1 else t


@dataclass
class HunyuanDiTDiffusionModel(DiffusionModel):
    """ComfyUI 0.3.64's model_base.HunyuanDiT around the network: the BERT states (context) and mask, mT5's states
    and mask beside them, and v1.0's image size condition (height, width, target height, target width, 0, 0; 768
    where the conditioning gives none)."""

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        for key, what in (("control", "ControlNets"), ("ref_latents", "reference latents")):
            if cond.get(key):
                raise NotImplementedError(f"{what} are not supported for HunyuanDiT models yet")
        if cond.get("conditioning_mt5xl") is None or cond.get("attention_mask") is None:
            raise ValueError(
                "HunyuanDiT needs its text encoders' conditioning (BERT's states and mask, mT5-XL's states and mask): "
                "encode the prompt with the CLIP of a HunyuanDiT checkpoint"
            )
        b, dev, dt = x.shape[0], x.device, self.dtype
        t5_mask = cond.get("attention_mask_mt5xl")
        t5 = cond["conditioning_mt5xl"]
        if t5_mask is None:
            t5_mask = torch.ones(t5.shape[:2])
        meta = torch.tensor([[768.0, 768.0, 768.0, 768.0, 0.0, 0.0]])
        t = torch.as_tensor(timestep, dtype=torch.float32, device=dev).reshape(-1)
        out = self.module(
            x.to(dt),
            t.expand(b) if t.numel() == 1 else t,
            _batched(cond["context"].to(dev, dt), b),
            _batched(cond["attention_mask"].to(dev), b),
            _batched(t5.to(dev, dt), b),
            _batched(t5_mask.to(dev), b),
            meta.expand(b, 6),
        )
        return out.float()


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> HunyuanDiTDiffusionModel:
    """A HunyuanDiT DiffusionModel from its file (bare or in a checkpoint), LoRAs merged in the file's names."""
    module, config = load_single_file_transformer(
        ref,
        state_dict,
        what="HunyuanDiT transformer",
        layout=hunyuan_dit_layout,
        lora_targets=lora_targets,
        convert=dict,
        infer_config=infer_config,
        model_class=HunyuanDiTNetwork,
    )
    arch = "hunyuan_dit1" if config["size_cond"] else "hunyuan_dit"  # ComfyUI's HunyuanDiT1 / HunyuanDiT
    return HunyuanDiTDiffusionModel(
        arch=arch,
        module=module,
        latent_format=latent_format(arch),
        sampling=dict(sampling_config(arch)),
        config=config,
        dtype=next(module.parameters()).dtype,
    )


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> Any:
    """A HunyuanDiT checkpoint's VAE (`vae.`): SDXL's, an SD-style AutoencoderKL in the ldm layout."""
    from nodes.models import vae as vae_mod
    from nodes.models.errors import ModelLoadError
    from nodes.models.loader import build_kl_vae

    path = ref.sources[0] if ref.sources else None
    sd = strip_prefix(dict(state_dict), "vae.")
    if "encoder.conv_in.weight" not in sd:
        raise ModelLoadError(path, "holds no VAE under vae.")
    if not vae_mod.is_diffusers_layout(sd):
        sd = vae_mod.ldm_to_diffusers(sd, path)
    return build_kl_vae(sd, path, "hunyuan_dit")


# The loader (nodes.models.loader) finds the text encoders' entry point on this module too.
from nodes.models.hunyuan_dit_text import load_text_encoder  # noqa: E402, F401
