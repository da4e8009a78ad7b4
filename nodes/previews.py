"""Latent previews during sampling (ComfyUI's --preview-method): a cheap image of the current
x0 prediction, sent as a binary websocket frame by the engine's progress hook.

`latent2rgb` (and `auto`) project the latent channels linearly onto RGB. The projection is a
normalisation of the first three channels rather than per-model fitted factors: it shows layout and
progress, not colours, and costs microseconds. TAESD previews are not available (no tiny decoders ship).
"""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

METHODS = ("none", "auto", "latent2rgb")
_method = "none"
MAX_SIZE = 512


def set_method(method: str, max_size: int = 512) -> None:
    global _method, MAX_SIZE
    if method == "taesd":
        method = "latent2rgb"  # no TAESD decoders ship with Comfy Cluster: fall back like ComfyUI does
    if method not in METHODS:
        raise ValueError(f"--preview-method: unknown method {method!r}")
    _method, MAX_SIZE = method, max_size


def enabled() -> bool:
    return _method != "none"


def latent_to_image(latent: torch.Tensor) -> Image.Image:
    """First item of a [B,C,H,W] latent (of a video latent [B,C,T,H,W], its first frame) -> an RGB image
    (channels 0..2, each stretched to 0..255)."""
    x = (latent[0, :3, 0] if latent.dim() == 5 else latent[0, :3]).float()
    if x.shape[0] < 3:
        x = x.repeat(3, 1, 1)[:3]
    lo = x.amin(dim=(1, 2), keepdim=True)
    hi = x.amax(dim=(1, 2), keepdim=True)
    x = (x - lo) / (hi - lo).clamp_min(1e-6)
    return Image.fromarray((x.permute(1, 2, 0).numpy() * 255).astype(np.uint8))


def preview(latent: torch.Tensor) -> tuple[str, Image.Image, int] | None:
    """The (format, image, max size) triple ComfyUI's ProgressBar passes to its hook, or None when off."""
    if not enabled():
        return None
    return ("JPEG", latent_to_image(latent), MAX_SIZE)
