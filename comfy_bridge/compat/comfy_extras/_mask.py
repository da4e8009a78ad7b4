"""`comfy_extras.nodes_mask.composite`: paste `source` into `destination` (channel-first, modified in place
and returned) at pixel position (x, y) // multiplier, blended by `mask`; the function the compositing nodes
use (ImageCompositeMasked with multiplier 1, LatentCompositeMasked with 8)."""

from __future__ import annotations

import torch

from nodes.library.mask import paste_masked


def composite(
    destination: torch.Tensor,
    source: torch.Tensor,
    x: int,
    y: int,
    mask: torch.Tensor | None = None,
    multiplier: int = 8,
    resize_source: bool = False,
) -> torch.Tensor:
    return paste_masked(destination, source.to(destination.device), x, y, mask, multiplier, resize_source)
