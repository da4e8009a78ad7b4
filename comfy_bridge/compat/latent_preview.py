"""`latent_preview`: sampler step callbacks and the previewers packs build. The preview method is ours
(nodes.previews, set by --preview-method; off by default like ComfyUI's): with previews on, a format with
ComfyUI's RGB factors previews through them, any other through our channel projection. TAESD decoders do
not ship with Comfy Cluster, so `TAESD` refuses and the taesd method falls back as ComfyUI's does when
the decoder file is missing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from PIL import Image

from comfy_bridge.compat.comfy.cli_args import LatentPreviewMethod  # noqa: F401  (packs read it here)
from comfy_bridge.compat.comfy.utils import ProgressBar
from comfy_bridge.packs.origin import UnsupportedFeature
from nodes import previews

MAX_PREVIEW_RESOLUTION = previews.MAX_SIZE


def preview_to_image(latent_image: torch.Tensor) -> Image.Image:
    """An [H, W, 3] image in -1..1 as a PIL image."""
    pixels = ((latent_image.float() + 1.0) / 2.0).clamp(0, 1).mul(255).to("cpu", torch.uint8)
    return Image.fromarray(pixels.numpy())


class LatentPreviewer:
    def decode_latent_to_preview(self, x0: torch.Tensor) -> Image.Image:
        return previews.latent_to_image(x0.detach().cpu())

    def decode_latent_to_preview_image(self, preview_format: str, x0: torch.Tensor) -> tuple[str, Image.Image, int]:
        return ("JPEG", self.decode_latent_to_preview(x0), previews.MAX_SIZE)


class TAESD(torch.nn.Module):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedFeature(
            "latent_preview.TAESD", "no TAESD decoders ship with Comfy Cluster; use --preview-method latent2rgb"
        )


class TAESDPreviewerImpl(LatentPreviewer):
    """Previews through a decoder the pack brings (anything with `.decode(latent) -> [B,3,H,W]` in -1..1)."""

    def __init__(self, taesd: Any) -> None:
        self.taesd = taesd

    def decode_latent_to_preview(self, x0: torch.Tensor) -> Image.Image:
        return preview_to_image(self.taesd.decode(x0[:1])[0].movedim(0, 2))


class Latent2RGBPreviewer(LatentPreviewer):
    """A linear map of the latent channels onto RGB (factors: one (R, G, B) row per channel)."""

    def __init__(self, latent_rgb_factors: Any, latent_rgb_factors_bias: Any = None) -> None:
        self.latent_rgb_factors = torch.tensor(latent_rgb_factors).transpose(0, 1)
        self.latent_rgb_factors_bias = (
            None if latent_rgb_factors_bias is None else torch.tensor(latent_rgb_factors_bias)
        )

    def decode_latent_to_preview(self, x0: torch.Tensor) -> Image.Image:
        x0 = x0[0, :, 0] if x0.ndim == 5 else x0[0]  # first item (and first frame of a video latent)
        factors = self.latent_rgb_factors.to(x0.device, x0.dtype)
        bias = None if self.latent_rgb_factors_bias is None else self.latent_rgb_factors_bias.to(x0.device, x0.dtype)
        return preview_to_image(torch.nn.functional.linear(x0.movedim(0, -1), factors, bias))


def get_previewer(device: Any, latent_format: Any) -> LatentPreviewer | None:
    """None with previews off; else RGB factors when the format has them, our projection otherwise."""
    if not previews.enabled():
        return None
    factors = getattr(latent_format, "latent_rgb_factors", None)
    if factors is not None:
        return Latent2RGBPreviewer(factors, getattr(latent_format, "latent_rgb_factors_bias", None))
    return LatentPreviewer()


def prepare_callback(model: Any, steps: int, x0_output_dict: dict | None = None) -> Callable:
    latent_format = getattr(getattr(model, "model", None), "latent_format", None)
    previewer = get_previewer(None, latent_format)
    pbar = ProgressBar(steps)

    def callback(step: int, x0: Any, x: Any, total_steps: int) -> None:
        if x0_output_dict is not None:
            x0_output_dict["x0"] = x0
        image = previewer.decode_latent_to_preview_image("JPEG", x0) if previewer else None
        pbar.update_absolute(step + 1, total_steps, image)

    return callback
