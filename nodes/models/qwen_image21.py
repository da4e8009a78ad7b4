"""Qwen-Image 2.1 diffusion models (single-stream DiT, 32 blocks, one shared modulation) from the files ComfyUI
users download (diffusion_models/qwen_image_2.1*.safetensors: diffusers' names with the SwiGLU gate and up
projections fused as `img_mlp.gate_up`, gate rows first; bare or under `model.diffusion_model.`).

The network is diffusers' QwenImage21Transformer2DModel (config from the tensor shapes, by the newest ComfyUI
source's model_detection rule). `apply` drives its layers with today's ComfyUI semantics: a [B,64,H,W] latent
(one token per latent cell), sigma as the timestep, the text states as the context; reference latents
(ReferenceLatent / TextEncodeQwenImage21) are spliced into the text at their `image_slots` and the target image
comes last; attention is block-causal (text causal, each image block bidirectional) and the text and reference
rows are modulated as at timestep 0. diffusers' own forward pairs 2x2 latent cells per vision slot, so it needs
even grids; the layers driven here take any grid, as ComfyUI's model does, and equal diffusers' forward where it
runs (tests/models/test_qwen_image21.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import torch
from diffusers import QwenImage21Transformer2DModel
from diffusers.loaders.single_file_utils import (
    convert_qwen_image21_transformer_checkpoint_to_diffusers,
)
from diffusers.models.transformers.transformer_qwenimage21 import (
    QwenImage21Rope,
    QwenImage21TemporalTimesteps,
)

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models.components import DiffusionModel
from nodes.models.detect import QWEN_IMAGE21_KEYS
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.qwen_image import ComfyRotaryPositions
from nodes.models.safetensors_io import build_module

ROPE_AXES = (16, 56, 56)  # frame, row, column split of the 128-wide heads (ComfyUI and diffusers alike)


def to_diffusers_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' names from ComfyUI's file: the prefix stripped, `img_mlp.gate_up` split by diffusers' own
    single-file converter (files saved with split projections pass through unchanged)."""
    prefix = find_prefix(state_dict.keys(), QWEN_IMAGE21_KEYS[0])
    if prefix is None:
        raise ValueError(f"not a Qwen-Image 2.1 state dict (no {QWEN_IMAGE21_KEYS[0]})")
    return convert_qwen_image21_transformer_checkpoint_to_diffusers(strip_prefix(dict(state_dict), prefix))


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """QwenImage21Transformer2DModel's config from a diffusers-layout state dict's shapes, as ComfyUI's
    model_detection reads them: head width from the q-norm, heads from img_in's width, the text width from
    txt_in's norm, the MLP ratio from the up projection."""
    inner, in_channels = sd["img_in.weight"].shape
    head_dim = int(sd["transformer_blocks.0.attn.norm_q.weight"].shape[0])
    if inner % head_dim:
        raise ValueError(f"width {inner} is not a multiple of the head width {head_dim}")
    if head_dim != sum(ROPE_AXES):
        raise ValueError(f"head width {head_dim}: Qwen-Image 2.1's rotary positions need 128-wide heads")
    mlp = int(sd["transformer_blocks.0.img_mlp.proj.weight"].shape[0])
    if mlp % inner:
        raise ValueError(f"MLP width {mlp} is not a multiple of the width {inner}")
    return {
        "patch_size": 1,
        "in_channels": int(in_channels),
        "out_channels": int(sd["proj_out.weight"].shape[0]),
        "num_layers": count_blocks(sd, "transformer_blocks"),
        "attention_head_dim": head_dim,
        "num_attention_heads": int(inner // head_dim),
        "context_in_dim": int(sd["txt_in.text_norm.weight"].shape[0]),
        "mlp_ratio": mlp // int(inner),
        "axes_dims_rope": ROPE_AXES,
    }


Segment = tuple[int, int, bool]  # (start, end, is_text) of one prefix run of the joint sequence


def _image_positions(index: float, h: int, w: int, target_h: int, target_w: int) -> torch.Tensor:
    # A grid centred on the origin; half a cell off where its parity differs from the target's, so it centres
    # on the target (today's ComfyUI build_sequence).
    rows = torch.arange(h, dtype=torch.float32) - (h - h // 2) + 0.5 * (h % 2 - target_h % 2)
    cols = torch.arange(w, dtype=torch.float32) - (w - w // 2) + 0.5 * (w % 2 - target_w % 2)
    return torch.stack(
        [torch.full((h, w), float(index)), rows[:, None].expand(h, w), cols[None, :].expand(h, w)], dim=-1
    ).reshape(-1, 3)


def joint_layout(
    text_len: int, ref_shapes: Sequence[tuple[int, int]], slots: Sequence[int], target: tuple[int, int]
) -> tuple[list[tuple[str, int, int]], torch.Tensor, list[Segment]]:
    """Where every part of the joint sequence goes: parts ("text", start, end) or ("image", i, tokens) in order
    (image i = reference i, the last one the target), the [N,3] rotary positions, and the prefix's segments.
    Reference i sits at text position slots[i] (missing slots: after the text); text advances one position
    per token on all axes, an image takes the frame position where it starts and then max(h, w)."""
    slots = (list(slots) + [text_len] * len(ref_shapes))[: len(ref_shapes)]
    bounds = [0, *slots, text_len]
    parts, positions, segments = [], [], []
    pos, length = 0, 0
    for i, (start, end) in enumerate(pairwise(bounds)):
        n = end - start
        if n > 0:
            parts.append(("text", start, end))
            positions.append((pos + torch.arange(n, dtype=torch.float32))[:, None].expand(n, 3))
            segments.append((length, length + n, True))
            pos, length = pos + n, length + n
        h, w = ref_shapes[i] if i < len(ref_shapes) else target
        parts.append(("image", i, h * w))
        positions.append(_image_positions(pos, h, w, *target))
        if i < len(ref_shapes):
            segments.append((length, length + h * w, False))
        pos, length = pos + max(h, w), length + h * w
    return parts, torch.cat(positions), segments


def _one_frame(x: torch.Tensor, what: str) -> torch.Tensor:
    if x.dim() == 5:
        if x.shape[2] != 1:
            raise ValueError(f"Qwen-Image 2.1 takes single images; this {what} has {x.shape[2]} frames")
        return x[:, :, 0]
    return x


@dataclass
class QwenImage21DiffusionModel(DiffusionModel):
    rope: ComfyRotaryPositions | None = None

    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control"):
            raise NotImplementedError("ControlNets are not supported for Qwen-Image 2.1 models yet")
        module: QwenImage21Transformer2DModel = self.module
        frames = x.dim() == 5
        x = _one_frame(x, "latent")
        b, _, h, w = x.shape
        device, dtype = x.device, self.dtype
        refs = [_one_frame(r, "reference latent").to(device, dtype) for r in cond.get("ref_latents") or []]
        refs = [r.expand(b, -1, -1, -1) if r.shape[0] == 1 else r for r in refs]
        context = cond["context"].to(device, dtype)
        parts, positions, segments = joint_layout(
            context.shape[1], [r.shape[-2:] for r in refs], cond.get("image_slots") or [], (h, w)
        )
        txt = module.txt_in(context)
        images = refs + [x.to(dtype)]
        hidden = torch.cat(
            [txt[:, p[1] : p[2]] if p[0] == "text" else module.img_in(images[p[1]].flatten(2).mT) for p in parts], dim=1
        )
        rotary = self.rope.positions_freqs(positions).to(device)
        prefix_len = hidden.shape[1] - h * w
        target_mask = torch.zeros(hidden.shape[1], dtype=torch.bool, device=device)
        target_mask[prefix_len:] = True
        # ComfyUI rounds sigma*1000 to the compute dtype before embedding; text and references take t = 0's row.
        t = torch.as_tensor(timestep, dtype=torch.float32, device=device).reshape(-1)
        t = (t.expand(b) if t.numel() == 1 else t) * 1000
        t = t.to(dtype) / 1000
        temb = module.time_text_embed(torch.cat([t, t.new_zeros(1)]), hidden)
        modulation = module.modulation(temb)
        for block in module.transformer_blocks:
            hidden = block(
                hidden_states=hidden,
                modulation=modulation,
                rotary_emb=rotary,
                target_token_mask=target_mask,
                segments=segments,
            )
        out = module.proj_out(module.norm_out(hidden[:, prefix_len:], temb[:-1]))
        out = out.mT.reshape(b, -1, h, w).float()
        return out[:, :, None] if frames else out


def _skeleton(config: dict[str, Any]) -> QwenImage21Transformer2DModel:
    """The model built on the meta device, but for its computed tables (no file holds them): the timestep
    frequencies and diffusers' rotary tables are made on the CPU."""
    module = QwenImage21Transformer2DModel(**config)
    with torch.device("cpu"):
        module.time_text_embed.time_proj = QwenImage21TemporalTimesteps(timestep_dim=256)
        module.pos_embed = QwenImage21Rope(theta=10000, axes_dim=list(config["axes_dims_rope"]))
    return module


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> QwenImage21DiffusionModel:
    """A Qwen-Image 2.1 DiffusionModel from a bare or `model.diffusion_model.`-prefixed transformer file
    (fused or split MLP). It computes in float32 whatever the file's dtype."""
    path = ref.sources[0] if ref.sources else None
    if ref.patches:
        raise ModelLoadError(path, "LoRAs are not supported for Qwen-Image 2.1 models yet")
    try:
        sd = to_diffusers_layout(state_dict)
        config = infer_config(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Qwen-Image 2.1 transformer: {e}") from None
    module = build_module(lambda: _skeleton(config), sd, path, "Qwen-Image 2.1 transformer")
    return QwenImage21DiffusionModel(
        arch="qwen_image21",
        module=module,
        latent_format=latent_format("qwen_image21"),
        sampling=dict(sampling_config("qwen_image21")),
        config=config,
        rope=ComfyRotaryPositions(config["axes_dims_rope"]),
    )


# The loader (nodes.models.loader) finds every Qwen-Image 2.1 entry point on this module.
from nodes.models.qwen_image21_text import load_text_encoder
from nodes.models.qwen_image21_vae import load_vae

__all__ = [
    "infer_config",
    "joint_layout",
    "load_diffusion_model",
    "load_text_encoder",
    "load_vae",
    "to_diffusers_layout",
]
