"""SeedVR2's colour correction (today's ComfyUI comfy/ldm/seedvr/color_fix.py, read from its newest source): the
upscaled frames take the colours of the frames they were made from. Every function works on frames
[N, 3, H, W] in [-1, 1], each frame on its own.

- wavelet: the upscaled frame's fine detail (five levels of a dilated binomial blur) over the reference's coarse
  colour;
- lab: wavelet first, then in CIELAB (D65) the a* and b* channels take the reference's value distribution
  (quantile matching) and L* moves a fifth of the way to it;
- adain: each channel's mean and standard deviation become the reference's."""

from __future__ import annotations

import torch
import torch.nn.functional as F

LEVELS = 5
LUMINANCE_KEPT = 0.8  # the share of the upscaled frame's own L* that lab keeps
ADAIN_EPS = 1e-5
# CIE 15's constants and the sRGB <-> XYZ matrices of the D65 white point
DELTA = 6.0 / 29.0
KAPPA = (29.0 / 3.0) ** 3
WHITE_X, WHITE_Z = 0.95047, 1.08883
RGB_TO_XYZ = (
    (0.4124564, 0.3575761, 0.1804375),
    (0.2126729, 0.7151522, 0.0721750),
    (0.0193339, 0.1191920, 0.9503041),
)
XYZ_TO_RGB = (
    (3.2404542, -1.5371385, -0.4985314),
    (-0.9692660, 1.8760108, 0.0415560),
    (0.0556434, -0.2040259, 1.0572252),
)


def _match_size(style: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    if style.shape == like.shape:
        return style
    return F.interpolate(style, size=like.shape[-2:], mode="bilinear", align_corners=False)


def _blur(x: torch.Tensor, spacing: int) -> torch.Tensor:
    """The 3x3 binomial blur with its taps `spacing` apart (at most an eighth of the short side), edges repeated."""
    spacing = min(spacing, max(1, min(x.shape[-2:]) // 8))
    taps = torch.tensor([0.25, 0.5, 0.25], dtype=x.dtype, device=x.device)
    kernel = (taps[:, None] * taps[None, :]).expand(x.shape[1], 1, 3, 3)
    padded = F.pad(x, (spacing,) * 4, mode="replicate")
    return F.conv2d(padded, kernel, groups=x.shape[1], dilation=spacing)


def _bands(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the detail the blurs removed, what is left after the last blur)."""
    detail = torch.zeros_like(x)
    for level in range(LEVELS):
        coarse = _blur(x, 2**level)
        detail = detail + x - coarse
        x = coarse
    return detail, x


def wavelet_transfer(frames: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    detail, _ = _bands(frames)
    _, colour = _bands(_match_size(reference, frames))
    return (detail + _match_size(colour, detail)).clamp(-1.0, 1.0)


def adain_transfer(frames: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    dtype = frames.dtype
    frames, reference = frames.float(), _match_size(reference, frames).float()

    def stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat = x.flatten(2)
        return flat.mean(2)[..., None, None], (flat.var(2, correction=0) + ADAIN_EPS).sqrt()[..., None, None]

    (mean, std), (ref_mean, ref_std) = stats(frames), stats(reference)
    return ((frames - mean) / std * ref_std + ref_mean).clamp(-1.0, 1.0).to(dtype)


def _apply_matrix(pixels: torch.Tensor, rows: tuple) -> torch.Tensor:
    """A 3x3 colour matrix applied to every pixel of [N, 3, H, W]."""
    matrix = torch.tensor(rows, dtype=torch.float32, device=pixels.device)
    return (
        (pixels.permute(0, 2, 3, 1).reshape(-1, 3) @ matrix.T)
        .reshape(pixels.shape[0], pixels.shape[2], pixels.shape[3], 3)
        .permute(0, 3, 1, 2)
    )


def _to_lab(rgb: torch.Tensor) -> torch.Tensor:
    linear = torch.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    xyz = _apply_matrix(linear, RGB_TO_XYZ)
    xyz = xyz / torch.tensor([WHITE_X, 1.0, WHITE_Z], device=xyz.device)[None, :, None, None]
    f = torch.where(xyz > DELTA**3, xyz ** (1.0 / 3.0), (xyz * KAPPA + 16.0) / 116.0)
    fx, fy, fz = f.unbind(1)
    return torch.stack([fy * 116.0 - 16.0, (fx - fy) * 500.0, (fy - fz) * 200.0], dim=1)


def _from_lab(lab: torch.Tensor) -> torch.Tensor:
    lightness, a, b = lab.unbind(1)
    fy = (lightness + 16.0) / 116.0
    f = torch.stack([a / 500.0 + fy, fy, fy - b / 200.0], dim=1)
    xyz = torch.where(f > DELTA, f**3.0, (f * 116.0 - 16.0) / KAPPA)
    xyz = xyz * torch.tensor([WHITE_X, 1.0, WHITE_Z], device=xyz.device)[None, :, None, None]
    linear = _apply_matrix(xyz, XYZ_TO_RGB)
    rgb = torch.where(linear > 0.0031308, linear.clamp(min=0.0) ** (1.0 / 2.4) * 1.055 - 0.055, linear * 12.92)
    return rgb.clamp(0.0, 1.0)


def _quantile_match(values: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """`values` given the distribution of `reference`: the k-th smallest value becomes the reference's value at the
    same quantile (rounded down in its ranks)."""
    ranks_sorted, order = torch.sort(values.flatten())
    ref_sorted, _ = torch.sort(reference.flatten())
    if ref_sorted.numel() != ranks_sorted.numel():
        quantiles = torch.linspace(0, 1, ranks_sorted.numel(), device=values.device)
        ref_sorted = ref_sorted[(quantiles * (ref_sorted.numel() - 1)).long().clamp(0, ref_sorted.numel() - 1)]
    matched = torch.empty_like(ref_sorted)
    matched[order] = ref_sorted
    return matched.reshape(values.shape)


def lab_transfer(frames: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Frame by frame: the quantile matching is over one frame's pixels."""
    dtype = frames.dtype
    out = []
    for frame, ref in zip(frames.split(1), reference.split(1), strict=True):
        frame = wavelet_transfer(frame, ref)
        ref = _match_size(ref, frame)
        lab = _to_lab(((frame.float() + 1.0) * 0.5).clamp(0.0, 1.0))
        ref_lab = _to_lab(((ref.float() + 1.0) * 0.5).clamp(0.0, 1.0))
        matched = [_quantile_match(lab[:, c], ref_lab[:, c]) for c in range(3)]
        lightness = lab[:, 0] * LUMINANCE_KEPT + matched[0] * (1.0 - LUMINANCE_KEPT)
        rgb = _from_lab(torch.stack([lightness, matched[1], matched[2]], dim=1))
        out.append((rgb * 2.0 - 1.0).to(dtype))
    return torch.cat(out)


TRANSFERS = {"lab": lab_transfer, "wavelet": wavelet_transfer, "adain": adain_transfer}
