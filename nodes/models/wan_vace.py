"""Wan 2.1 VACE's control input for diffusers' WanVACETransformer3DModel, as ComfyUI's WAN21_Vace and
VaceWanModel build and apply it.

Each WanVaceToVideo of a conditioning gives one context: its inactive and reactive latents (each put in model
space) and its 64-channel mask, 96 channels. diffusers' model takes one context; ComfyUI runs the VACE blocks
on every context and, after each VACE layer's block, adds the contexts' hints in their order. The first context
goes through diffusers' forward; the others are run by hooks installed at load: one before the first VACE
block computes their hints from the same inputs, one before the block after each VACE layer (the output norm
after the last block) adds them, so the sums happen in ComfyUI's order. The hooks read this call's contexts
from a context variable, so one module serves concurrent calls."""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch

from nodes.models.unet import resize_to_batch_size

MASK_CHANNELS = 64  # the 8x8 pixel mask folded into a latent cell


@dataclass
class _Chain:
    """The contexts after the first of one call, their strengths, and (once computed) their hints per layer."""

    contexts: list[torch.Tensor]
    strengths: list[float]
    hints: list[list[torch.Tensor]] = field(default_factory=list)
    busy: bool = False


_chain: ContextVar[_Chain | None] = ContextVar("wan_vace_chain", default=None)


def build_context(
    latent_format: Any, frames: Sequence[torch.Tensor] | None, masks: Sequence[torch.Tensor] | None, x: torch.Tensor
) -> torch.Tensor:
    """[B, contexts, 96, T, H, W] from WanVaceToVideo's latents and masks (ComfyUI's WAN21_Vace.extra_conds);
    without any, one context of zero latents and an all-ones mask."""
    shape = x.shape[2:]
    channels = latent_format.channels
    if not frames:
        frames = [torch.zeros(x.shape[0], 2 * channels, *shape)]
    if not masks:
        masks = [torch.ones(x.shape[0], MASK_CHANNELS, *shape)] * len(frames)
    out = []
    for vf, mask in zip(frames, masks, strict=True):
        vf = vf.to(x.device, x.dtype)
        vf = torch.cat([latent_format.process_in(vf[:, i : i + channels]) for i in range(0, vf.shape[1], channels)], 1)
        joined = torch.cat([vf, mask.to(x.device, x.dtype)], dim=1)
        out.append(resize_to_batch_size(joined, x.shape[0]))
    return torch.stack(out, dim=1)


def install_hooks(module: torch.nn.Module) -> None:
    """The hooks that run and add a call's further contexts (see the module docstring)."""
    module.vace_blocks[0].register_forward_pre_hook(partial(_compute_hints, module))
    blocks = module.blocks
    for n, layer in enumerate(module.config.vace_layers):
        target = blocks[layer + 1] if layer + 1 < len(blocks) else module.norm_out
        target.register_forward_pre_hook(partial(_add_hints, n))


def forward_kwargs(
    module: torch.nn.Module, context: torch.Tensor, strengths: Sequence[float], pad: Any
) -> tuple[dict[str, torch.Tensor], _Chain | None]:
    """diffusers' arguments for the first context, and the chain of the others for the hooks (None if none).
    `pad` pads a [B,C,T,H,W] tensor as the model's input is padded."""
    if len(strengths) != context.shape[1]:
        raise ValueError(f"vace_strength: {len(strengths)} strengths for {context.shape[1]} VACE contexts")
    layers = len(module.config.vace_layers)
    kwargs = {
        "control_hidden_states": pad(context[:, 0]),
        "control_hidden_states_scale": torch.full((layers,), float(strengths[0]), device=context.device),
    }
    if context.shape[1] == 1:
        return kwargs, None
    return kwargs, _Chain([pad(context[:, k]) for k in range(1, context.shape[1])], [float(s) for s in strengths[1:]])


def run_with(chain: _Chain | None, fn: Any) -> Any:
    token = _chain.set(chain)
    try:
        return fn()
    finally:
        _chain.reset(token)


def _compute_hints(module: torch.nn.Module, _block: torch.nn.Module, args: tuple) -> None:
    chain = _chain.get()
    if chain is None or chain.busy:
        return
    hidden, encoder, _, temb, rotary = args
    chain.busy = True
    try:
        for ctx in chain.contexts:
            c = module.vace_patch_embedding(ctx).flatten(2).transpose(1, 2)
            c = torch.nn.functional.pad(c, (0, 0, 0, hidden.shape[1] - c.shape[1]))
            hints = []
            for block in module.vace_blocks:
                hint, c = block(hidden, encoder, c, temb, rotary)
                hints.append(hint)
            chain.hints.append(hints)
    finally:
        chain.busy = False


def _add_hints(n: int, _module: torch.nn.Module, args: tuple) -> tuple | None:
    chain = _chain.get()
    if chain is None or not chain.hints:
        return None
    x = args[0]
    for hints, strength in zip(chain.hints, chain.strengths, strict=True):
        x = x + hints[n].to(x) * strength
    return (x, *args[1:])
