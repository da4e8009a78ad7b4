"""ComfyUI's comfy_extras.nodes_controlnet: ControlNetInpaintingAliMamaApply.

ComfyUI masks the hint image and concatenates the mask to the hint only for ControlNets that take a mask channel
(its `concat_mask`: SD3 inpainting ControlNets with 17 hint channels, Flux AliMama and Qwen-Image InstantX
inpainting ControlNets). Every other ControlNet is applied as Apply ControlNet applies it, the mask unused, and the
VAE kept only by ControlNets that take VAE-encoded hints (ComfyUI's set_cond_hint stores it only for a ControlNet
with a latent format: SD3's here), so an SD1/SDXL ControlNet runs on its image hint. No ControlNet with a mask
channel loads here (an SD3 inpainting ControlNet is refused at load, naming its 17 hint channels), so none takes the
masked path."""

from __future__ import annotations

import torch

from nodes.inputs import require_component
from nodes.model_nodes import ControlNetApplyAdvanced

MODULE = "comfy_extras.nodes_controlnet"
LATENT_HINT_ARCHS = {"sd3"}  # ControlNets whose hint the apply node's VAE encodes (nodes.model_nodes.with_hint_vae)
PERCENT = {"min": 0.0, "max": 1.0, "step": 0.001}


class ControlNetInpaintingAliMamaApply(ControlNetApplyAdvanced):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "positive": ("CONDITIONING",),
                "negative": ("CONDITIONING",),
                "control_net": ("CONTROL_NET",),
                "vae": ("VAE",),
                "image": ("IMAGE",),
                "mask": ("MASK",),
                "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 10.0, "step": 0.01}),
                "start_percent": ("FLOAT", {"default": 0.0, **PERCENT}),
                "end_percent": ("FLOAT", {"default": 1.0, **PERCENT}),
            }
        }

    FUNCTION = "apply_inpaint_controlnet"
    DESCRIPTION = (
        "Apply ControlNet for inpainting ControlNets: for a ControlNet with a mask channel the hint is masked and "
        "the mask joins it; any other ControlNet is applied as Apply ControlNet does, the mask unused."
    )
    RELATIVE_PYTHON_MODULE = MODULE

    def apply_inpaint_controlnet(
        self,
        positive,
        negative,
        control_net,
        vae,
        image,
        mask,
        strength: float,
        start_percent: float,
        end_percent: float,
    ):
        if not isinstance(mask, torch.Tensor) or mask.ndim not in (2, 3):
            raise ValueError(f"mask: expected a MASK [B,H,W] or [H,W], got {type(mask).__name__}")
        control_net = require_component(control_net, "controlnet", "control_net")
        hint_vae = vae if control_net.arch in LATENT_HINT_ARCHS else None
        return self.apply_controlnet(
            positive, negative, control_net, image, strength, start_percent, end_percent, vae=hint_vae
        )


NODE_CLASS_MAPPINGS = {"ControlNetInpaintingAliMamaApply": ControlNetInpaintingAliMamaApply}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
