"""ComfyUI's comfy_extras.nodes_canny: Canny edges, as kornia.filters.canny computes them (kornia 0.9,
the version ComfyUI 0.3.64 runs with), written here on torch because kornia is not a dependency.

kornia's steps, with its defaults (5x5 gaussian, sigma 1, eps 1e-6): grey = 0.299 R + 0.587 G + 0.114 B;
a separable gaussian blur with reflected borders; the unnormalised Sobel gradient with replicated
borders; magnitude sqrt(gx² + gy² + eps); non-maximum suppression along the gradient direction rounded to
45°; weak (> low) and strong (> high) thresholds; hysteresis that keeps weak pixels 8-connected to strong
ones. The float operations are done in kornia's order, because the edge map flips wherever a magnitude
lands on the other side of a threshold or a tie.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

MODULE = "comfy_extras.nodes_canny"
KERNEL_SIZE = 5
SIGMA = 1.0
EPS = 1e-6
# Neighbour k of a pixel for the gradient direction k x 45° (k = 8: the pixel itself), as (dy, dx).
WINDOW_OFFSETS = ((0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1), (-1, 0), (-1, 1), (0, 0))
SOBEL = (
    (((-1.0, 0.0, 1.0), (-2.0, 0.0, 2.0), (-1.0, 0.0, 1.0)),),
    (((-1.0, -2.0, -1.0), (0.0, 0.0, 0.0), (1.0, 2.0, 1.0)),),
)


class BaseError(Exception):
    """kornia's error type; named like it so a failing prompt reports what ComfyUI reports."""


BaseError.__module__ = "kornia.core.exceptions"


def _grey(image: torch.Tensor) -> torch.Tensor:
    """[B,3,H,W] -> [B,1,H,W] with the BT.601 weights, accumulated as kornia does (mul, then addcmul)."""
    weights = torch.tensor([0.299, 0.587, 0.114], dtype=image.dtype, device=image.device)
    r, g, b = image.unbind(dim=-3)
    out = torch.addcmul(torch.addcmul(r * weights[0], g, weights[1]), b, weights[2])
    return out.unsqueeze(-3)


def _gaussian_1d(size: int, sigma: float, like: torch.Tensor) -> torch.Tensor:
    """The normalised 1-D gaussian of `size` taps, shape [1, size]."""
    sig = torch.tensor([[sigma]], dtype=like.dtype, device=like.device)
    x = torch.arange(size, dtype=like.dtype, device=like.device) - float(size // 2)
    dist = x.pow(2.0).expand(1, -1)
    dist = dist - dist.min(-1, keepdim=True)[0]
    gauss = torch.exp(-dist / (2 * sig.pow(2.0)))
    return gauss / gauss.sum(-1, keepdim=True)


def _blur(image: torch.Tensor) -> torch.Tensor:
    """Separable gaussian blur of [B,1,H,W] with reflected borders, rows first, along kornia's two
    code paths (a tap-by-tap accumulation for large float images on the CPU, else two convolutions)."""
    kernel = _gaussian_1d(KERNEL_SIZE, SIGMA, image)
    radius = KERNEL_SIZE // 2
    large = (
        image.device.type == "cpu"
        and image.is_contiguous()
        and image.shape[-2] * image.shape[-1] >= 256 * 256
        and image.numel() >= 128 * 1024
    )
    if large:
        for axis in (-1, -2):
            size = image.shape[axis]
            pad = (radius, radius, 0, 0) if axis == -1 else (0, 0, radius, radius)
            padded = F.pad(image, pad, mode="reflect")
            out = padded.narrow(axis, 0, size) * kernel[:, 0, None, None, None]
            for tap in range(1, KERNEL_SIZE):
                out.addcmul_(padded.narrow(axis, tap, size), kernel[:, tap, None, None, None])
            image = out
        return image
    rows = F.conv2d(F.pad(image, [radius, radius, 0, 0], mode="reflect"), kernel.reshape(1, 1, 1, KERNEL_SIZE))
    return F.conv2d(F.pad(rows, [0, 0, radius, radius], mode="reflect"), kernel.reshape(1, 1, KERNEL_SIZE, 1))


def _hysteresis(edges: torch.Tensor) -> torch.Tensor:
    """Promote weak (0.5) pixels touching a strong (1) one until nothing changes; weak ones left become 0."""
    kernels = torch.zeros((8, 1, 3, 3), dtype=edges.dtype, device=edges.device)
    for k, (dy, dx) in enumerate(WINDOW_OFFSETS[:8]):
        kernels[k, 0, 1 + dy, 1 + dx] = 1.0
    previous = -torch.ones_like(edges)
    while ((previous - edges).abs() != 0).any():
        previous = edges
        weak = (edges == 0.5).to(edges.dtype)
        strong = (edges == 1).to(edges.dtype)
        reached = (F.conv2d(edges, kernels, padding=1) == 1).any(1, keepdim=True).to(edges.dtype)
        reached = reached * weak + strong
        edges = reached + (reached == 0) * weak * 0.5
    return (edges == 1).to(edges.dtype)


def canny_edges(image: torch.Tensor, low_threshold: float, high_threshold: float) -> torch.Tensor:
    """Edge map [B,1,H,W] (0 or 1) of a [B,C,H,W] image with 1 or 3 channels."""
    if not low_threshold <= high_threshold:
        raise BaseError(
            "Invalid input thresholds. low_threshold should be smaller than or equal to the "
            f"high_threshold. Got: {low_threshold}>{high_threshold}"
        )
    if not 0 < low_threshold:
        raise BaseError(f"Invalid low threshold. Should be positive. Got: {low_threshold}")
    grey = _grey(image) if image.shape[1] == 3 else image
    blurred = _blur(grey)
    b, c, h, w = blurred.shape
    sobel = torch.tensor(SOBEL, dtype=blurred.dtype, device=blurred.device)
    grad = F.conv2d(F.pad(blurred.reshape(b * c, 1, h, w), [1, 1, 1, 1], "replicate"), sobel).reshape(b, c, 2, h, w)
    gx, gy = grad[:, :, 0], grad[:, :, 1]
    # Padded by one pixel of zero gradient: the border has the magnitude of a flat pixel.
    gx_p, gy_p = F.pad(gx, (1, 1, 1, 1)), F.pad(gy, (1, 1, 1, 1))
    padded = torch.sqrt(gx_p * gx_p + gy_p * gy_p + EPS)
    angle_45 = (torch.nan_to_num(torch.atan2(gy, gx)) * (4 / math.pi)).round()
    window = torch.stack([padded[..., 1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w] for dy, dx in WINDOW_OFFSETS], 2)
    magnitude = window[:, :, 8]
    positive = (angle_45 % 8).long()
    negative = ((angle_45 + 4) % 8).long()
    neighbours = torch.gather(window, 2, torch.stack([positive, negative], 2))

    def beats(neighbour: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
        # Ties win only towards the right (direction 0) and downwards (2), as in OpenCV's Canny.
        tie_ok = (direction == 0) | (direction == 2)
        return (magnitude > neighbour) | (tie_ok & (magnitude == neighbour))

    is_max = beats(neighbours[:, :, 0], positive) & beats(neighbours[:, :, 1], negative)
    is_max = is_max & (magnitude > padded[..., :1, :1])
    magnitude = magnitude * is_max
    low = magnitude > low_threshold
    high = magnitude > high_threshold
    edges = ((low.to(magnitude.dtype) + high.to(magnitude.dtype)) * 0.5).to(magnitude.dtype)
    return _hysteresis(edges)


class Canny:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE", {}),
                "low_threshold": ("FLOAT", {"default": 0.4, "min": 0.01, "max": 0.99, "step": 0.01}),
                "high_threshold": ("FLOAT", {"default": 0.8, "min": 0.01, "max": 0.99, "step": 0.01}),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "detect_edge"
    CATEGORY = "image/preprocessors"
    DESCRIPTION = (
        "Canny edge detection (kornia's): white edges on black. The thresholds apply to the "
        "Sobel gradient magnitude of the blurred grey image; low must not exceed high."
    )

    def detect_edge(self, image: torch.Tensor, low_threshold: float, high_threshold: float):
        edges = canny_edges(image.movedim(-1, 1), low_threshold, high_threshold)
        return (edges.repeat(1, 3, 1, 1).movedim(1, -1),)


NODE_CLASS_MAPPINGS = {"Canny": Canny}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
