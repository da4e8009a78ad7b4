"""Stable Cascade's image-side nodes (ComfyUI's comfy_extras.nodes_stable_cascade) that need a VAE: stage C latents
of an image and the super-resolution ControlNet's inputs. (Its empty latents and stage B conditioning are model-free:
nodes/library/family_latents.py.)"""

from __future__ import annotations

import torch

from nodes.inputs import require_component
from nodes.model_nodes import DOWNSCALE_RATIO, encode_pixels
from nodes.upscale import common_upscale


class StableCascade_StageC_VAEEncode:
    """The image resized (bicubic, centre crop) to the VAE's cells of 1/compression of its size and encoded (with
    the stage C coder: stage C's latent), and an all-zero stage B latent at 1/4 of the size."""

    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_stable_cascade"
    FUNCTION = "execute"
    CATEGORY = "latent/stable_cascade"
    RETURN_TYPES = ("LATENT", "LATENT")
    RETURN_NAMES = ("stage_c", "stage_b")

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE", {}),
                "vae": ("VAE", {}),
                "compression": ("INT", {"default": 42, "min": 4, "max": 128, "step": 1}),
            }
        }

    async def execute(self, image: torch.Tensor, vae, compression: int):
        vae = require_component(vae, "vae", "vae")
        height, width = image.shape[-3], image.shape[-2]
        ratio = DOWNSCALE_RATIO.get(vae.arch, 8)
        out_w, out_h = (width // compression) * ratio, (height // compression) * ratio
        if out_w == 0 or out_h == 0:
            raise ValueError(f"compression: {compression} leaves no latent cell of a {width}x{height} image")
        resized = common_upscale(image.movedim(-1, 1), out_w, out_h, "bicubic", "center").movedim(1, -1)
        stage_c = await encode_pixels(vae, resized[:, :, :, :3])
        stage_b = torch.zeros(stage_c.shape[0], 4, (height // 8) * 2, (width // 8) * 2)
        return ({"samples": stage_c}, {"samples": stage_b})


class StableCascade_SuperResolutionControlnet:
    """The image encoded by the given VAE, channels last (the super-resolution ControlNet's input, as an IMAGE), and
    the all-zero stage C (1/16 of the size) and stage B (1/2) latents to sample at."""

    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_stable_cascade"
    FUNCTION = "execute"
    CATEGORY = "_for_testing/stable_cascade"
    EXPERIMENTAL = True
    RETURN_TYPES = ("IMAGE", "LATENT", "LATENT")
    RETURN_NAMES = ("controlnet_input", "stage_c", "stage_b")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE", {}), "vae": ("VAE", {})}}

    async def execute(self, image: torch.Tensor, vae):
        vae = require_component(vae, "vae", "vae")
        height, width, batch = image.shape[-3], image.shape[-2], image.shape[0]
        controlnet_input = (await encode_pixels(vae, image[:, :, :, :3])).movedim(1, -1)
        stage_c = torch.zeros(batch, 16, height // 16, width // 16)
        stage_b = torch.zeros(batch, 4, height // 2, width // 2)
        return (controlnet_input, {"samples": stage_c}, {"samples": stage_b})


NODE_CLASS_MAPPINGS = {
    "StableCascade_StageC_VAEEncode": StableCascade_StageC_VAEEncode,
    "StableCascade_SuperResolutionControlnet": StableCascade_SuperResolutionControlnet,
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
