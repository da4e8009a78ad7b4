"""ComfyUI's comfy_extras.nodes_ip2p: InstructPixToPixConditioning. The image's latent rides on both
conditionings as concat_latent_image; an InstructPix2Pix UNet (8 input channels) takes it joined to its input
in each denoise step (nodes.models.unet.UNetModel.concat_image)."""

from __future__ import annotations

import torch

from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.inputs import require_component
from nodes.library.inpaint import encode_pixels


class InstructPixToPixConditioning:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_ip2p"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    FUNCTION = "encode"
    CATEGORY = "conditioning/instructpix2pix"
    DESCRIPTION = (
        "Prepares an InstructPix2Pix edit: the image's latent goes into both conditionings (the model "
        "reads it beside the latent it denoises) and an empty latent of the image's size is returned."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "positive": ("CONDITIONING", {}),
                "negative": ("CONDITIONING", {}),
                "vae": ("VAE", {}),
                "pixels": ("IMAGE", {"tooltip": "The image to edit."}),
            }
        }

    async def encode(self, positive: list, negative: list, pixels: torch.Tensor, vae) -> tuple[list, list, dict]:
        positive, negative = require(positive, "positive"), require(negative, "negative")
        # encode_pixels centre-crops to whole latent cells first, as ComfyUI's node does.
        concat = await encode_pixels(require_component(vae, "vae", "vae"), pixels)
        extra = {"concat_latent_image": concat}
        return set_values(positive, extra), set_values(negative, extra), {"samples": torch.zeros_like(concat)}


NODE_CLASS_MAPPINGS = {"InstructPixToPixConditioning": InstructPixToPixConditioning}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
