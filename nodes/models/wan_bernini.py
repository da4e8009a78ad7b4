"""Bernini in-context conditioning on a Wan model (ByteDance's Bernini-R: a Wan 2.2 text-to-video A14B pair of
experts in Wan's own layout; ComfyUI's WanModel reads it since its newest source, newer than every ComfyUI that
runs here: written from that definition).

BerniniConditioning puts VAE latents on the conditioning (`context_latents`: the source video, a reference video,
reference images, in that order). The network embeds each with the same patch embedding as the noisy latent and
appends its tokens after the video's; every token runs through the plain Wan blocks at the step's timestep and only
the video's tokens reach the output. Rotary positions: the video's grid from frame 0 as always; each context latent
its own grid, also from frame 0, turned further by its stream number (1, 2, ... in order) at every frequency of the
whole head, as if its position along one extra axis were that number (ComfyUI composes that rotation with the grid's).
"""

from __future__ import annotations

from typing import Any

import torch

from nodes.models.wan import HEAD_DIM, PATCH, pad_to_patch
from nodes.models.wan_animate2 import attend, embed_context, embed_time, finish_block, modulation, normed, qkv
from nodes.models.wan_scail import ROPE_THETA, grid_positions, rope_tables


def stream_rotation(source_id: int, head_dim: int = HEAD_DIM) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of a stream's extra turn (source_id times each of the head's head_dim / 2 frequencies, spread over
    the whole head rather than one axis), each angle twice as diffusers' rotary tables hold them."""
    omega = 1.0 / ROPE_THETA ** torch.linspace(0, (head_dim - 2) / head_dim, head_dim // 2, dtype=torch.float64)
    angle = float(source_id) * omega
    return (
        torch.cos(angle).to(torch.float32).repeat_interleave(2),
        torch.sin(angle).to(torch.float32).repeat_interleave(2),
    )


def stream_rope(grid: tuple[int, int, int], source_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The rotary tables of one token grid (frames, rows, columns from 0) turned by its stream's rotation; stream 0 (the
    video being denoised) is not turned. Turns add up: cos(a + b) and sin(a + b) from both tables in float32."""
    cos, sin = rope_tables(grid_positions(*grid))
    if not source_id:
        return cos, sin
    cos_b, sin_b = stream_rotation(source_id, cos.shape[-1])
    return cos * cos_b - sin * sin_b, sin * cos_b + cos * sin_b


def _tokens(module: Any, latent: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int, int]]:
    out = module.patch_embedding(latent)
    return out.flatten(2).transpose(1, 2), tuple(out.shape[2:])


def forward(
    module: Any,
    x: torch.Tensor,
    t: torch.Tensor,
    context: torch.Tensor,
    clip_fea: torch.Tensor | None,
    context_latents: list[torch.Tensor],
) -> torch.Tensor:
    """The Wan network on [B, C, T, H, W] with the context latents' tokens after the video's: its prediction for the
    video alone."""
    b, _, frames, h, w = x.shape
    tokens, grid = _tokens(module, pad_to_patch(x))
    main = tokens.shape[1]
    parts, ropes = [tokens], [stream_rope(grid, 0)]
    for i, latent in enumerate(context_latents):
        more, more_grid = _tokens(module, pad_to_patch(latent.to(x)))
        parts.append(more)
        ropes.append(stream_rope(more_grid, i + 1))
    tokens = torch.cat(parts, dim=1).contiguous()
    rope = tuple(torch.cat([r[k] for r in ropes], dim=1).to(x.device) for k in (0, 1))
    temb, mod_t = embed_time(module, t, tokens)
    ctx = embed_context(module, context, clip_fea)
    for block in module.blocks:
        mod = modulation(block, mod_t)
        out = attend(*qkv(block.attn1, normed(block, tokens, mod), rope))
        tokens = finish_block(block, tokens, out, mod, ctx)
    shift, scale = (module.scale_shift_table.to(temb.device) + temb.unsqueeze(1)).chunk(2, dim=1)
    out = module.proj_out((module.norm_out(tokens.float()) * (1 + scale) + shift).type_as(tokens))[:, :main]
    f, gh, gw = grid
    out = out.reshape(b, f, gh, gw, *PATCH, -1).permute(0, 7, 1, 4, 2, 5, 3, 6)
    out = out.flatten(6, 7).flatten(4, 5).flatten(2, 3)
    return out[:, :, :frames, :h, :w]


def apply(model: Any, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
    """A plain Wan model's step with Bernini's context latents (in model space, already batched) in cond."""
    module = model.module
    for part in ("ref_conv", "control_adapter", "vace_blocks"):
        if getattr(module, part, None) is not None:
            raise ValueError(
                f"context_latents (BerniniConditioning) need a plain Wan model; this one has {part}, which ComfyUI's "
                "Bernini path does not read"
            )
    device, dtype = x.device, model.dtype
    inp = x if cond.get("concat") is None else torch.cat([x, cond["concat"].to(x)], dim=1)
    latents = [latent.to(device, dtype) for latent in cond["context_latents"]]
    channels = module.config.in_channels
    if inp.shape[1] != channels or any(latent.shape[1] != channels for latent in latents):
        raise ValueError(
            f"context_latents (BerniniConditioning): this Wan model embeds {channels}-channel latents; the video "
            f"has {inp.shape[1]}, the context latents {[latent.shape[1] for latent in latents]} (Bernini-R is a "
            "Wan 2.2 text-to-video A14B model with 16-channel Wan 2.1 latents)"
        )
    t = torch.as_tensor(timestep, dtype=torch.float32, device=device)
    if t.dim() > 1:
        raise ValueError("context_latents (BerniniConditioning) take one timestep per sample, not per frame")
    t = t.reshape(-1).expand(x.shape[0])
    clip_fea = cond.get("clip_fea")
    if module.condition_embedder.image_embedder is None:
        clip_fea = None  # read only by a model with an image embedder, as in ComfyUI
    context = cond["context"].to(device, dtype)
    out = forward(module, inp.to(dtype), t, context, None if clip_fea is None else clip_fea.to(device, dtype), latents)
    return out.float()
