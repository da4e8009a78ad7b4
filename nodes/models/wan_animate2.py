"""Wan Animate 2 (github.com/Wan-Video/Wan-Animate-2, ComfyUI's comfy/ldm/wan/model_animate2.py, written here
from its definition): Wan 2.1 image-to-video 14B weights driven by a pose video.

Its files are byte for byte a Wan 2.1 image-to-video file; ComfyUI tells them by the safetensors metadata
`config` = {"transformer": {"model_type": "animate2"}} (model_detection reads the file's transformer config over
the key-derived one), so that is the rule here too (`is_animate2`).

The network is the Wan transformer (diffusers' WanTransformer3DModel, loaded by nodes.models.wan) run with a
second branch: the pose video's latents, patch-embedded as [pose | ones (4) | pose], go through the same blocks
at timestep 1 with their own prompt (`context_pose`) and CLIP vision states, their rotary positions one frame
later and one latent width to the right of the generation's. In every block the generation's frame 0 (the
reference image's slot) attends to the generation's tokens, frame j >= 1 to them and to pose frame j - 1's keys
and values (scaled by pose_strength; the reference frame's values by reference_strength). Without pose latents
(the node's pose window excludes the step) the blocks run as plain Wan.

WanAnimate2Cache at int8 / int4: upstream keeps each block's pose input (batch element 0) from the first forward
pass of a sampling run, quantized (comfy-kitchen's per-row int8 or int4 layouts with a ConvRot rotation), and in
every later pass reprojects that block's pose keys and values from the dequantized input instead of running the
branch. The branch reads neither the step's latent nor its timestep, so the inputs it stored are the ones it
computes again here: a pass run inside `reading_pose_cache(dtype)` takes its keys and values from those inputs
put through the same quantize-dequantize round trip, while the branch itself goes on at full precision, as the
stored inputs were.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from nodes.models.wan import PATCH, WanDiffusionModel, pad_to_patch

MODEL_TYPE = "animate2"
POSE_CACHE_DTYPES = ("int8", "int4")
CONVROT_GROUP = 256  # upstream's PoseBranchCache.CONVROT_GROUPSIZE, divided by 4 until it divides the width


@dataclass
class PoseCacheRead:
    """One forward pass's view of WanAnimate2Cache's quantized pose cache: `dtype` None while the pass fills it
    (full precision), int8 / int4 once filled; `used` is set when the pass ran the pose branch at all."""

    dtype: str | None
    used: bool = False


_POSE_CACHE: ContextVar[PoseCacheRead | None] = ContextVar("animate2_pose_cache", default=None)


@contextmanager
def reading_pose_cache(dtype: str | None) -> Iterator[PoseCacheRead]:
    """The forward passes run inside see the pose cache as `dtype` (None: filling it)."""
    if dtype is not None and dtype not in POSE_CACHE_DTYPES:
        raise ValueError(f"pose cache dtype {dtype!r} is not one of {', '.join(POSE_CACHE_DTYPES)}")
    read = PoseCacheRead(dtype)
    token = _POSE_CACHE.set(read)
    try:
        yield read
    finally:
        _POSE_CACHE.reset(token)


def pose_cache_read() -> PoseCacheRead | None:
    """The pose cache the current forward pass runs with (None: no quantized cache)."""
    return _POSE_CACHE.get()


def stored_pose_input(x: torch.Tensor, dtype: str) -> torch.Tensor:
    """A block's pose input as upstream's cache gives it back: batch element 0 quantized over [tokens, width]
    (one scale per token; int8 per-channel with ConvRot, or the ConvRot W4A4 layout) and dequantized, repeated
    to the batch."""
    try:
        from comfy_kitchen.tensor import TensorCoreConvRotW4A4Layout, TensorWiseINT8Layout
    except ImportError as e:  # comfy-kitchen is installed on Linux and Windows only
        raise ValueError(f"WanAnimate2Cache {dtype}: the quantized pose cache needs comfy-kitchen ({e})") from None

    first = x[:1]
    group = CONVROT_GROUP
    while group > 4 and first.shape[-1] % group:
        group //= 4
    flat = first.reshape(-1, first.shape[-1])
    if dtype == "int4":
        layout, (q, params) = (
            TensorCoreConvRotW4A4Layout,
            TensorCoreConvRotW4A4Layout.quantize(flat, convrot_groupsize=group),
        )
    else:
        layout = TensorWiseINT8Layout
        q, params = layout.quantize(flat, is_weight=True, per_channel=True, convrot=True, convrot_groupsize=group)
    back = layout.dequantize(q, params).reshape(first.shape).to(x.dtype)
    return back.expand(x.shape[0], *back.shape[1:])


def is_animate2(metadata: dict[str, str]) -> bool:
    """True for a file whose metadata names it Animate 2, as ComfyUI's model_detection reads it."""
    try:
        config = json.loads(metadata.get("config", "{}"))
    except json.JSONDecodeError:
        return False
    transformer = config.get("transformer") if isinstance(config, dict) else None
    return isinstance(transformer, dict) and transformer.get("model_type") == MODEL_TYPE


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Wan's rotary embedding on interleaved pairs ([B, S, heads, head_dim])."""
    x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)
    c, s = cos[..., 0::2], sin[..., 1::2]
    return torch.stack([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).flatten(-2).type_as(x)


def _rope(module: Any, frames: range, rows: int, cols: range) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary tables for a token grid at the given integer frame / row / column positions."""
    rope = module.rope
    sizes = [rope.t_dim, rope.h_dim, rope.w_dim]
    out = []
    for table in (rope.freqs_cos, rope.freqs_sin):
        t, h, w = table.split(sizes, dim=1)
        nf, nh, nw = len(frames), rows, len(cols)
        parts = [
            t[frames.start : frames.stop].view(nf, 1, 1, -1).expand(nf, nh, nw, -1),
            h[:rows].view(1, nh, 1, -1).expand(nf, nh, nw, -1),
            w[cols.start : cols.stop].view(1, 1, nw, -1).expand(nf, nh, nw, -1),
        ]
        out.append(torch.cat(parts, dim=-1).reshape(1, nf * nh * nw, 1, -1))
    return out[0], out[1]


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Attention over [B, S, heads, head_dim] tensors, flattened back to [B, S, dim]."""
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    return out.transpose(1, 2).flatten(2)


def qkv(attn: Any, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]):
    heads = attn.heads
    q = attn.norm_q(attn.to_q(x)).unflatten(2, (heads, -1))
    k = attn.norm_k(attn.to_k(x)).unflatten(2, (heads, -1))
    v = attn.to_v(x).unflatten(2, (heads, -1))
    return _rotate(q, *rope), _rotate(k, *rope), v


def modulation(block: Any, temb: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (block.scale_shift_table + temb.float()).chunk(6, dim=1)


def _cross(attn: Any, x: torch.Tensor, context: torch.Tensor, image_tokens: int | None) -> torch.Tensor:
    """Cross-attention to the prompt and, in an image-to-video block, to the CLIP vision tokens before it. As
    ComfyUI's WanI2VCrossAttention: without CLIP states (image_tokens None) both read the whole context."""
    heads = attn.heads
    text = context if image_tokens is None else context[:, image_tokens:]
    q = attn.norm_q(attn.to_q(x)).unflatten(2, (heads, -1))
    k = attn.norm_k(attn.to_k(text)).unflatten(2, (heads, -1))
    out = attend(q, k, attn.to_v(text).unflatten(2, (heads, -1)))
    if attn.add_k_proj is not None:
        image = context if image_tokens is None else context[:, :image_tokens]
        k_img = attn.norm_added_k(attn.add_k_proj(image)).unflatten(2, (heads, -1))
        out = out + attend(q, k_img, attn.add_v_proj(image).unflatten(2, (heads, -1)))
    return attn.to_out[0](out)


def finish_block(
    block: Any, x: torch.Tensor, attn_out: torch.Tensor, mod: tuple, context: tuple[torch.Tensor, int | None]
) -> torch.Tensor:
    """The block after its self-attention: gated residual, cross-attention, feed-forward (diffusers' order)."""
    _, _, gate, c_shift, c_scale, c_gate = mod
    x = (x.float() + block.attn1.to_out[0](attn_out) * gate).type_as(x)
    x = x + _cross(block.attn2, block.norm2(x.float()).type_as(x), *context)
    h = (block.norm3(x.float()) * (1 + c_scale) + c_shift).type_as(x)
    return (x.float() + block.ffn(h).float() * c_gate).type_as(x)


def normed(block: Any, x: torch.Tensor, mod: tuple) -> torch.Tensor:
    shift, scale = mod[0], mod[1]
    return (block.norm1(x.float()) * (1 + scale) + shift).type_as(x)


def embed_context(module: Any, text: torch.Tensor, image: torch.Tensor | None) -> tuple[torch.Tensor, int | None]:
    """The embedded context (CLIP vision tokens first) and the number of CLIP vision tokens in it."""
    embedder = module.condition_embedder
    context = embedder.text_embedder(text)
    if image is None:
        return context, None
    if embedder.image_embedder is not None:
        context = torch.cat([embedder.image_embedder(image), context], dim=1)
    return context, image.shape[-2]


def embed_time(module: Any, t: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    embedder = module.condition_embedder
    temb = embedder.time_embedder(embedder.timesteps_proj(t).to(like.dtype)).type_as(like)
    return temb, embedder.time_proj(embedder.act_fn(temb)).unflatten(1, (6, -1))


@dataclass
class Animate2Inputs:
    """What an Animate 2 step reads beside the Wan inputs (ComfyUI's WAN_Animate2 extra_conds)."""

    pose: torch.Tensor | None  # pose video latents in model space, one frame fewer than the generation
    context_pose: torch.Tensor | None = None
    clip_fea_pose: torch.Tensor | None = None
    pose_strength: float = 1.0
    reference_strength: float = 1.0


def forward(
    module: Any,
    x: torch.Tensor,
    t: torch.Tensor,
    context: torch.Tensor,
    clip_fea: torch.Tensor | None,
    extra: Animate2Inputs,
) -> torch.Tensor:
    """The Animate 2 network on [B, 36, T, H, W] (latent and image conditioning; frame 0 the reference slot)."""
    b, _, frames, h, w = x.shape
    x = pad_to_patch(x)
    f_gen, gh, gw = x.shape[2] // PATCH[0], x.shape[3] // PATCH[1], x.shape[4] // PATCH[2]
    hw = gh * gw
    rope = _rope(module, range(f_gen), gh, range(gw))
    tokens = module.patch_embedding(x).flatten(2).transpose(1, 2).contiguous()
    temb, mod_t = embed_time(module, t, tokens)
    context_gen = embed_context(module, context, clip_fea)

    pose = extra.pose
    x_pose = rope_pose = mod_pose = context_pose = None
    if pose is not None:
        pose = pad_to_patch(pose.to(x))
        if pose.shape[2] != f_gen - 1:
            raise ValueError(
                f"pose branch has {pose.shape[2]} latent frames, expected {f_gen - 1} "
                "(generation frames minus the reference-image slot)"
            )
        pose_in = torch.cat([pose, torch.ones_like(pose[:, :4]), pose], dim=1)
        x_pose = module.patch_embedding(pose_in).flatten(2).transpose(1, 2).contiguous()
        # one frame after the generation's (past the reference slot), one latent width to the right
        w_patches = (w + PATCH[2] // 2) // PATCH[2]
        rope_pose = _rope(module, range(1, pose.shape[2] + 1), gh, range(w_patches, w_patches + gw))
        mod_pose = embed_time(module, torch.ones_like(t.reshape(-1)), tokens)[1]
        text_pose = context if extra.context_pose is None else extra.context_pose.to(context)
        image_pose = clip_fea if extra.clip_fea_pose is None else extra.clip_fea_pose.to(context)
        context_pose = embed_context(module, text_pose, image_pose)

    cache = pose_cache_read()
    stored = cache.dtype if cache is not None and x_pose is not None else None
    if cache is not None and x_pose is not None:
        cache.used = True
    for block in module.blocks:
        k_pose = v_pose = None
        if x_pose is not None:
            mod = modulation(block, mod_pose)
            q, k, v = qkv(block.attn1, normed(block, x_pose, mod), rope_pose)
            k_pose, v_pose = k, v
            if stored is not None:  # a filled quantized cache: keys and values of the stored block input
                _, k_pose, v_pose = qkv(block.attn1, normed(block, stored_pose_input(x_pose, stored), mod), rope_pose)
            # the branch goes on at full precision: the next block's stored input was computed so
            x_pose = finish_block(block, x_pose, attend(q, k, v), mod, context_pose)
            if extra.pose_strength != 1.0:
                v_pose = v_pose * extra.pose_strength
        mod = modulation(block, mod_t)
        q, k, v = qkv(block.attn1, normed(block, tokens, mod), rope)
        if extra.reference_strength != 1.0:
            v = torch.cat([v[:, :hw] * extra.reference_strength, v[:, hw:]], dim=1)
        if k_pose is None:
            out = attend(q, k, v)
        else:  # frame j attends every generation token and pose frame j - 1 (frame 0 has none)
            parts = [attend(q[:, :hw], k, v)]
            for j in range(1, f_gen):
                pk, pv = k_pose[:, (j - 1) * hw : j * hw], v_pose[:, (j - 1) * hw : j * hw]
                parts.append(attend(q[:, j * hw : (j + 1) * hw], torch.cat([k, pk], 1), torch.cat([v, pv], 1)))
            out = torch.cat(parts, dim=1)
        tokens = finish_block(block, tokens, out, mod, context_gen)

    shift, scale = (module.scale_shift_table.to(temb.device) + temb.unsqueeze(1)).chunk(2, dim=1)
    out = module.proj_out((module.norm_out(tokens.float()) * (1 + scale) + shift).type_as(tokens))
    out = out.reshape(b, f_gen, gh, gw, *PATCH, -1).permute(0, 7, 1, 4, 2, 5, 3, 6)
    out = out.flatten(6, 7).flatten(4, 5).flatten(2, 3)
    return out[:, :, :frames, :h, :w]


@dataclass
class WanAnimate2DiffusionModel(WanDiffusionModel):
    """A Wan 2.1 image-to-video model run as Animate 2 (see the module's docstring)."""

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control"):
            raise NotImplementedError("ControlNets are not supported for Wan models")
        if x.dim() != 5:
            raise ValueError(f"Wan models take [B,C,T,H,W] video latents, got {tuple(x.shape)}")
        module = self.module
        device, dtype = x.device, self.dtype
        inp = x if cond.get("concat") is None else torch.cat([x, cond["concat"].to(x)], dim=1)
        if inp.shape[1] != module.config.in_channels:
            raise ValueError(
                f"this Wan Animate 2 model takes {module.config.in_channels} input channels (latent and "
                f"image conditioning), got {inp.shape[1]}; it needs WanAnimate2ToVideo's conditioning"
            )
        t = torch.as_tensor(timestep, dtype=torch.float32, device=device).reshape(-1).expand(x.shape[0])
        clip_fea = cond.get("clip_fea")
        pose = cond.get("pose_latents")
        extra = Animate2Inputs(
            pose=None if pose is None else pose.to(device, dtype),
            context_pose=cond.get("context_pose"),
            clip_fea_pose=cond.get("clip_fea_pose"),
            pose_strength=float(cond.get("pose_strength", 1.0)),
            reference_strength=float(cond.get("reference_strength", 1.0)),
        )
        context = cond["context"].to(device, dtype)
        out = forward(
            module, inp.to(dtype), t, context, None if clip_fea is None else clip_fea.to(device, dtype), extra
        )
        return out.float()
