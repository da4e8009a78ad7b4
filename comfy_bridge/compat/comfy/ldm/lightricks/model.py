"""`comfy.ldm.lightricks.model` (LTX-Video): the rotary embedding helper, and the model classes packs
subclass or check (building one raises UnsupportedFeature: this backend runs no LTX-Video model)."""

from __future__ import annotations

import torch

from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel


def apply_rotary_emb(input_tensor: torch.Tensor, freqs_cis: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Rotate interleaved pairs (x0, x1) of the last dim by (cos, sin) = freqs_cis: x*cos + (-x1, x0)*sin."""
    cos, sin = freqs_cis[0], freqs_cis[1]
    pairs = input_tensor.unflatten(-1, (-1, 2))
    rotated = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
    return input_tensor * cos + rotated * sin


class CrossAttention(UnsupportedModel):
    pass


class BasicTransformerBlock(UnsupportedModel):
    pass


class LTXVModel(UnsupportedModel):
    pass
