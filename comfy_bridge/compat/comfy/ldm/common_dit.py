"""`comfy.ldm.common_dit`: padding to the patch size and RMS norm, shared by the DiT models."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["pad_to_patch_size", "rms_norm"]


def pad_to_patch_size(img: torch.Tensor, patch_size: tuple = (2, 2), padding_mode: str = "circular") -> torch.Tensor:
    """Pad the trailing spatial dims of img ([B, C, *spatial]) at their end up to multiples of patch_size
    (circular by default; reflect while tracing or scripting, as circular padding does not trace)."""
    if padding_mode == "circular" and (torch.jit.is_tracing() or torch.jit.is_scripting()):
        padding_mode = "reflect"
    pad: list[int] = []
    for i in reversed(range(img.ndim - 2)):
        pad += [0, (patch_size[i] - img.shape[i + 2] % patch_size[i]) % patch_size[i]]
    return F.pad(img, pad, mode=padding_mode)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    """RMS norm over the last dim, times weight (cast to x's dtype and device) when given."""
    if weight is None:
        return F.rms_norm(x, (x.shape[-1],), eps=eps)
    return F.rms_norm(x, weight.shape, weight=weight.to(dtype=x.dtype, device=x.device), eps=eps)
