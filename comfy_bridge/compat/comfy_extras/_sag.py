"""`comfy_extras.nodes_sag.gaussian_blur_2d`: the per-channel Gaussian blur of Self-Attention Guidance, which
packs reuse (TiledDiffusion's utils); this backend's own SAG blur."""

from __future__ import annotations

import torch

from nodes.library.sag import gaussian_blur


def gaussian_blur_2d(img: torch.Tensor, kernel_size: int, sigma: float) -> torch.Tensor:
    return gaussian_blur(img, kernel_size, sigma)
