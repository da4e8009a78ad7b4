"""Inpainting encoders of ComfyUI's nodes.py: VAEEncodeForInpaint and InpaintModelConditioning.

Both crop the image to whole latent cells and paint the masked pixels mid-grey before encoding, so the VAE
sees no trace of what is to be replaced; the mask goes on as the latent's noise mask (the sampler keeps the
rest of the image) and, for InpaintModelConditioning, into the conditioning for inpainting models.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.inputs import require_component
from nodes.ksampler import call_model_fn
from nodes.model_nodes import crop_to_multiple

DOWNSCALE = 8  # every VAE we load has 8 pixels per latent cell


def mask_to_pixels(pixels: torch.Tensor, mask: torch.Tensor, m: int = DOWNSCALE) -> tuple[torch.Tensor, torch.Tensor]:
    """(pixels centre-cropped to multiples of m with the masked pixels set to 0.5, the mask [B,1,H,W] resized
    bilinearly to the image and cropped the same way). A pixel counts as masked where the mask rounds to 1."""
    if not isinstance(pixels, torch.Tensor) or pixels.ndim != 4:
        raise ValueError("pixels: expected an IMAGE [B,H,W,C]")
    if not isinstance(mask, torch.Tensor) or mask.ndim not in (2, 3, 4):
        raise ValueError("mask: expected a MASK [B,H,W] or [H,W]")
    mask = F.interpolate(
        mask.reshape(-1, 1, mask.shape[-2], mask.shape[-1]), size=tuple(pixels.shape[1:3]), mode="bilinear"
    )
    cropped = crop_to_multiple(pixels, m)
    y, x = (pixels.shape[1] % m) // 2, (pixels.shape[2] % m) // 2
    mask = mask[:, :, y : y + cropped.shape[1], x : x + cropped.shape[2]]
    keep = (1.0 - mask.round()).squeeze(1)
    out = cropped.clone()
    out[..., :3] = (out[..., :3] - 0.5) * keep.unsqueeze(-1) + 0.5
    return out, mask


def grow_mask(mask: torch.Tensor, by: int) -> torch.Tensor:
    """The rounded mask [B,1,H,W] widened by `by` pixels (a box filter, clamped), rounded again."""
    if by == 0:
        return mask.round()
    kernel = torch.ones((1, 1, by, by), dtype=mask.dtype, device=mask.device)
    grown = torch.clamp(F.conv2d(mask.round(), kernel, padding=math.ceil((by - 1) / 2)), 0, 1)
    return grown[:, :, : mask.shape[2], : mask.shape[3]].round()


async def encode_pixels(vae, pixels: torch.Tensor) -> torch.Tensor:
    out = await call_model_fn("vae_encode", vae, "vae", {"pixels": crop_to_multiple(pixels[..., :3], DOWNSCALE)}, {})
    return out["latent"]


class VAEEncodeForInpaint:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "pixels": ("IMAGE",),
                "vae": ("VAE",),
                "mask": ("MASK", {"tooltip": "The region to repaint (1)."}),
                "grow_mask_by": (
                    "INT",
                    {
                        "default": 6,
                        "min": 0,
                        "max": 64,
                        "step": 1,
                        "tooltip": "Pixels the noise mask is widened by, so the seam is repainted too.",
                    },
                ),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "encode"
    CATEGORY = "latent/inpaint"
    DESCRIPTION = (
        "Encodes an image for inpainting: the masked region is greyed out before encoding and the "
        "(widened) mask becomes the latent's noise mask."
    )

    async def encode(self, vae, pixels: torch.Tensor, mask: torch.Tensor, grow_mask_by: int = 6):
        vae = require_component(vae, "vae", "vae")
        masked, mask = mask_to_pixels(pixels, mask)
        return ({"samples": await encode_pixels(vae, masked), "noise_mask": grow_mask(mask, grow_mask_by)},)


class InpaintModelConditioning:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "positive": ("CONDITIONING",),
                "negative": ("CONDITIONING",),
                "vae": ("VAE",),
                "pixels": ("IMAGE",),
                "mask": ("MASK", {"tooltip": "The region to repaint (1)."}),
                "noise_mask": (
                    "BOOLEAN",
                    {
                        "default": True,
                        "tooltip": "Also set the mask as the latent's noise mask, so the sampler "
                        "keeps the image outside it.",
                    },
                ),
            }
        }

    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    FUNCTION = "encode"
    CATEGORY = "conditioning/inpaint"
    DESCRIPTION = (
        "Prepares inpainting: the latent of the whole image, and the latent of the image with the "
        "masked region greyed out plus the mask in both conditionings (what inpainting models read)."
    )

    async def encode(
        self, positive: list, negative: list, pixels: torch.Tensor, vae, mask: torch.Tensor, noise_mask: bool = True
    ):
        positive, negative = require(positive, "positive"), require(negative, "negative")
        vae = require_component(vae, "vae", "vae")
        masked, mask = mask_to_pixels(pixels, mask)
        concat = await encode_pixels(vae, masked)
        latent = {"samples": await encode_pixels(vae, pixels)}
        if noise_mask:
            latent["noise_mask"] = mask
        extra = {"concat_latent_image": concat, "concat_mask": mask}
        return set_values(positive, extra), set_values(negative, extra), latent


NODE_CLASS_MAPPINGS = {"VAEEncodeForInpaint": VAEEncodeForInpaint, "InpaintModelConditioning": InpaintModelConditioning}
NODE_DISPLAY_NAME_MAPPINGS = {
    "VAEEncodeForInpaint": "VAE Encode (for Inpainting)",
    "InpaintModelConditioning": "InpaintModelConditioning",
}
