"""ComfyUI's comfy_extras.nodes_chroma_radiance: the two nodes of Chroma Radiance, the pixel-space Chroma.

- EmptyChromaRadianceLatentImage: a blank batch in Chroma Radiance's "latent" space, which is the image itself:
  3 channels at full resolution (PixelDiT's template uses it too).
- ChromaRadianceOptions: in ComfyUI it sets the NeRF head's tile size (how many 16x16 patches the pixel decoder
  takes at once) for the sigmas in [end_sigma, start_sigma]. Tiling only bounds memory: every patch is decoded on
  its own, so the image does not depend on it. Our Radiance head decodes each patch the same way whatever the
  batch, so the node checks its inputs and passes the model through, as ComfyUI does for nerf_tile_size -1.
"""

from __future__ import annotations

import torch

from nodes.inputs import require_component
from nodes.latent import MAX_RESOLUTION

MODULE = "comfy_extras.nodes_chroma_radiance"


class EmptyChromaRadianceLatentImage:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("LATENT",)
    FUNCTION = "execute"
    CATEGORY = "latent/chroma_radiance"
    DESCRIPTION = "Makes a batch of blank pixel-space latents (3 channels at the image's size) for Chroma Radiance."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "width": ("INT", {"default": 1024, "min": 16, "max": MAX_RESOLUTION, "step": 16}),
                "height": ("INT", {"default": 1024, "min": 16, "max": MAX_RESOLUTION, "step": 16}),
                "batch_size": ("INT", {"default": 1, "min": 1, "max": 4096}),
            }
        }

    def execute(self, width: int, height: int, batch_size: int = 1):
        return ({"samples": torch.zeros([batch_size, 3, height, width])},)


class ChromaRadianceOptions:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "execute"
    CATEGORY = "model_patches/chroma_radiance"
    DESCRIPTION = "Allows setting advanced options for the Chroma Radiance model."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "preserve_wrapper": ("BOOLEAN", {"default": True}),
                "start_sigma": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0}),
                "end_sigma": ("FLOAT", {"default": 0.0, "min": 0.0, "max": 1.0}),
                "nerf_tile_size": ("INT", {"default": -1, "min": -1}),
            }
        }

    def execute(self, model, preserve_wrapper: bool, start_sigma: float, end_sigma: float, nerf_tile_size: int):
        model = require_component(model, "diffusion_model", "model")
        if nerf_tile_size < -1:
            raise ValueError(f"nerf_tile_size: {nerf_tile_size} is below -1 (-1 keeps the model's tile size)")
        return (model,)  # the tile size bounds the NeRF head's memory only; the image does not depend on it


NODE_CLASS_MAPPINGS = {
    "EmptyChromaRadianceLatentImage": EmptyChromaRadianceLatentImage,
    "ChromaRadianceOptions": ChromaRadianceOptions,
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
