"""VAEEncodeTiled (ComfyUI's nodes.py): the VAE encode in overlapping tiles, for images too large to encode
at once. The tiling is nodes.modelfns.vae.tiled_encode's, inside one vae_encode invocation."""

from __future__ import annotations

import torch

from nodes.inputs import require_component
from nodes.ksampler import call_model_fn
from nodes.model_nodes import crop_to_multiple


class VAEEncodeTiled:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "pixels": ("IMAGE",),
                "vae": ("VAE",),
                "tile_size": (
                    "INT",
                    {
                        "default": 512,
                        "min": 64,
                        "max": 4096,
                        "step": 64,
                        "tooltip": "Side of the square tiles in pixels.",
                    },
                ),
                "overlap": (
                    "INT",
                    {
                        "default": 64,
                        "min": 0,
                        "max": 4096,
                        "step": 32,
                        "tooltip": "Pixels neighbouring tiles share; their latents are blended there.",
                    },
                ),
                "temporal_size": (
                    "INT",
                    {"default": 64, "min": 8, "max": 4096, "step": 4, "tooltip": "Only used for video VAEs."},
                ),
                "temporal_overlap": (
                    "INT",
                    {"default": 8, "min": 4, "max": 4096, "step": 4, "tooltip": "Only used for video VAEs."},
                ),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "encode"
    CATEGORY = "_for_testing"
    DESCRIPTION = (
        "Encodes an image into a latent tile by tile (three tilings averaged, as ComfyUI does), using "
        "less memory than VAE Encode."
    )

    async def encode(
        self,
        vae,
        pixels: torch.Tensor,
        tile_size: int,
        overlap: int,
        temporal_size: int = 64,
        temporal_overlap: int = 8,
    ):
        vae = require_component(vae, "vae", "vae")
        # The half-size tiling must still advance: ComfyUI divides by zero (or tiles nothing) past this.
        if overlap >= tile_size // 2:
            raise ValueError(f"overlap: {overlap} must be less than half the tile size ({tile_size // 2})")
        out = await call_model_fn(
            "vae_encode",
            vae,
            "vae",
            # SeedVR2's VAE is not cropped (ComfyUI's crop_input False)
            {"pixels": crop_to_multiple(pixels[..., :3], 1 if vae.arch == "seedvr2" else 8)},
            {"tile": tile_size, "overlap": overlap},
        )
        return ({"samples": out["latent"]},)


NODE_CLASS_MAPPINGS = {"VAEEncodeTiled": VAEEncodeTiled}
NODE_DISPLAY_NAME_MAPPINGS = {"VAEEncodeTiled": "VAE Encode (Tiled)"}
