"""LTXVImgToVideo (ComfyUI 0.3.64's comfy_extras.nodes_lt): LTX-Video 0.9's image-to-video start. The image,
resized to width x height (bilinear, centre crop), is encoded by the LTX VAE into the first frames of a new
128-channel latent of 1 + (length - 1) // 8 frames at 1/32 the size (the rest zeros, every batch row the same),
and a noise mask [batch, 1, frames, 1, 1] of 1 - strength over those frames keeps them (the LTX-Video model reads
it as per-token timesteps). The conditionings pass through unchanged. Checked against ComfyUI 0.3.64 by
tests/models/test_ltxv.py (scripts/record_comfyui_ltxv.py)."""

from __future__ import annotations

from typing import Any

import torch

from nodes import MAX_RESOLUTION

LATENT_CHANNELS, SPATIAL, TEMPORAL = 128, 32, 8
LTX_VAE_ARCHS = ("ltxv", "ltx2")  # LTX-Video 0.9's VAE, and LTX-2's, which ComfyUI builds as the same class


class LTXVImgToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_lt"
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "positive": ("CONDITIONING",),
                "negative": ("CONDITIONING",),
                "vae": ("VAE",),
                "image": ("IMAGE",),
                "width": ("INT", {"default": 768, "min": 64, "max": MAX_RESOLUTION, "step": 32}),
                "height": ("INT", {"default": 512, "min": 64, "max": MAX_RESOLUTION, "step": 32}),
                "length": ("INT", {"default": 97, "min": 9, "max": MAX_RESOLUTION, "step": 8}),
                "batch_size": ("INT", {"default": 1, "min": 1, "max": 4096}),
                "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0}),
            }
        }

    async def execute(
        self,
        positive: list,
        negative: list,
        vae: Any,
        image: torch.Tensor,
        width: int,
        height: int,
        length: int,
        batch_size: int,
        strength: float,
    ):
        from nodes.inputs import require_component
        from nodes.ksampler import call_model_fn
        from nodes.upscale import common_upscale

        vae = require_component(vae, "vae", "vae")
        if vae.arch not in LTX_VAE_ARCHS:
            raise ValueError(f"vae: an LTX-Video VAE (of an LTX-Video checkpoint) is needed here, got a {vae.arch} VAE")
        if not isinstance(image, torch.Tensor) or image.ndim != 4:
            raise ValueError("image: expected an IMAGE [batch, height, width, channels]")
        width, height, length, batch_size = int(width), int(height), int(length), int(batch_size)
        pixels = common_upscale(image.movedim(-1, 1), width, height, "bilinear", "center").movedim(1, -1)
        out = await call_model_fn("vae_encode", vae, "vae", {"pixels": pixels[..., :3].contiguous()}, {})
        encoded = out["latent"]
        frames = (length - 1) // TEMPORAL + 1
        latent = torch.zeros(batch_size, LATENT_CHANNELS, frames, height // SPATIAL, width // SPATIAL)
        latent[:, :, : encoded.shape[2]] = encoded
        mask = torch.ones((batch_size, 1, frames, 1, 1), dtype=torch.float32)
        mask[:, :, : encoded.shape[2]] = 1.0 - float(strength)
        return (positive, negative, {"samples": latent, "noise_mask": mask})


NODE_CLASS_MAPPINGS = {"LTXVImgToVideo": LTXVImgToVideo}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
