"""Resizing of channel-first tensors [N,C,H,W] (or [N,C,T,H,W]) the way ComfyUI's nodes resize.

Methods: the torch interpolation modes "nearest-exact", "bilinear", "area", "bicubic"; "lanczos"
(through PIL on 8-bit values, as ComfyUI does, so results match its images); and "bislerp", which
interpolates each pixel's channel vector along a great circle (direction) while blending its length
linearly - better than bilinear for latents, whose channel vectors carry meaning in their direction.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

TORCH_MODES = ("nearest-exact", "bilinear", "area", "bicubic")


def center_crop(samples: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """Trim the longer side of `samples` (…,H,W) equally on both ends to the aspect ratio width:height."""
    old_h, old_w = samples.shape[-2], samples.shape[-1]
    old_aspect, new_aspect = old_w / old_h, width / height
    x = y = 0
    if old_aspect > new_aspect:
        x = round((old_w - old_w * (new_aspect / old_aspect)) / 2)
    elif old_aspect < new_aspect:
        y = round((old_h - old_h * (old_aspect / new_aspect)) / 2)
    return samples.narrow(-2, y, old_h - 2 * y).narrow(-1, x, old_w - 2 * x)


def common_upscale(samples: torch.Tensor, width: int, height: int, upscale_method: str, crop: str) -> torch.Tensor:
    """Resize [N,C,H,W] (or [N,C,T,H,W], frame by frame) to height x width; crop is "disabled" or "center"."""
    shape = tuple(samples.shape)
    if len(shape) > 4:
        # Fold every extra axis into the batch: [N,C,T..,H,W] -> [N*T..,C,H,W].
        n, c = shape[0], shape[1]
        samples = samples.reshape(n, c, -1, shape[-2], shape[-1]).movedim(2, 1).reshape(-1, c, shape[-2], shape[-1])
    if crop == "center":
        samples = center_crop(samples, width, height)
    out = resize(samples, width, height, upscale_method)
    if len(shape) == 4:
        return out
    out = out.reshape(shape[0], -1, shape[1], height, width).movedim(2, 1)
    return out.reshape(shape[:-2] + (height, width))


def resize(samples: torch.Tensor, width: int, height: int, method: str) -> torch.Tensor:
    """Resize [N,C,H,W] to [N,C,height,width] with one of TORCH_MODES, "lanczos" or "bislerp"."""
    if method == "bislerp":
        return bislerp(samples, width, height)
    if method == "lanczos":
        return lanczos(samples, width, height)
    if method not in TORCH_MODES:
        raise ValueError(f"unknown upscale method {method!r}")
    return F.interpolate(samples, size=(height, width), mode=method)


def lanczos(samples: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """PIL's Lanczos filter on 8-bit values, one channel plane at a time (PIL filters RGB planes independently)."""
    planes = np.clip(255.0 * samples.detach().float().cpu().numpy(), 0, 255).astype(np.uint8)
    out = np.empty(planes.shape[:2] + (height, width), dtype=np.float32)
    for i in range(planes.shape[0]):
        for c in range(planes.shape[1]):
            img = Image.fromarray(planes[i, c]).resize((width, height), resample=Image.Resampling.LANCZOS)
            out[i, c] = np.asarray(img, dtype=np.float32) / 255.0
    return torch.from_numpy(out).to(samples.device, samples.dtype)


def bislerp(samples: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """Separable slerp resize of [N,C,H,W]: first along W, then along H."""
    dtype = samples.dtype
    out = _slerp_axis(samples.float(), width, axis=-1)
    out = _slerp_axis(out, height, axis=-2)
    return out.to(dtype)


def _source_coords(old: int, new: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For each of `new` output positions: left source index, right source index and the weight of the right.

    Positions use half-pixel centres clamped to the edges, the same sampling as bilinear interpolation;
    interpolating an index ramp with torch's bilinear mode gives exactly those positions.
    """
    ramp = torch.arange(old, dtype=torch.float32, device=device).reshape(1, 1, 1, old)
    pos = F.interpolate(ramp, size=(1, new), mode="bilinear").reshape(new)
    left = pos.floor()
    right = (left + 1).clamp(max=old - 1)
    return left.long(), right.long(), pos - left


def _slerp_axis(x: torch.Tensor, new: int, axis: int) -> torch.Tensor:
    """Resample axis -1 or -2 of [N,C,H,W] to length `new` by slerping channel vectors of neighbours."""
    x = x.movedim(axis, -1)  # the resampled axis last: [N,C,A,L]
    left, right, t = _source_coords(x.shape[-1], new, x.device)
    a = x[..., left].movedim(1, -1)  # [N,A,new,C]
    b = x[..., right].movedim(1, -1)
    out = slerp(a, b, t.reshape(new, 1))
    return out.movedim(-1, 1).movedim(-1, axis)


def slerp(a: torch.Tensor, b: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Spherical interpolation of vectors on the last axis, with the length interpolated linearly.

    Nearly parallel vectors return `a`; nearly opposite ones (no unique great circle) fall back to
    a linear blend. A zero vector has no direction and contributes only its length.
    """
    na = a.norm(dim=-1, keepdim=True)
    nb = b.norm(dim=-1, keepdim=True)
    ua = torch.where(na == 0, torch.zeros_like(a), a / na)
    ub = torch.where(nb == 0, torch.zeros_like(b), b / nb)
    dot = (ua * ub).sum(-1, keepdim=True)
    omega = torch.acos(dot)
    so = torch.sin(omega)
    out = (torch.sin((1.0 - t) * omega) / so) * ua + (torch.sin(t * omega) / so) * ub
    out = out * (na * (1.0 - t) + nb * t)
    out = torch.where(dot > 1 - 1e-5, a, out)
    return torch.where(dot < 1e-5 - 1, a * (1.0 - t) + b * t, out)
