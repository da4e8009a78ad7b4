"""ComfyUI's comfy_extras.nodes_controlnet: ControlNetInpaintingAliMamaApply.

ComfyUI masks the hint image and joins the mask to the hint only for ControlNets that take a mask channel (its
`concat_mask`: SD3 inpainting ControlNets with 17 hint channels, Flux AliMama and Qwen-Image InstantX inpainting
ControlNets). Of those, the Qwen-Image InstantX Inpainting ControlNet loads here (a 68-wide hint embedder): its hint is
the image times the kept area (1 - mask, scaled to the image bilinearly and rounded), and the kept area itself goes
beside it (ComfyUI's extra_concat), which its network resizes to the latent (nodes.models.qwen_image_controlnet).
Every other ControlNet is applied as Apply ControlNet applies it, the mask unused, and the VAE kept only by
ControlNets that take VAE-encoded hints (ComfyUI's set_cond_hint stores it only for a ControlNet with a latent format:
SD3's and Qwen-Image's here), so an SD1/SDXL ControlNet runs on its image hint. An SD3 inpainting ControlNet is
refused at load, naming its 17 hint channels."""

from __future__ import annotations

import torch

from nodes.conditioning import require
from nodes.inputs import require_component
from nodes.model_nodes import LATENT_HINT_ARCHS, ControlNetApplyAdvanced, apply_control, check_hint, with_hint_vae
from nodes.models.controlnet import resize_hint
from nodes.models.safetensors_io import shapes_of

MODULE = "comfy_extras.nodes_controlnet"
PERCENT = {"min": 0.0, "max": 1.0, "step": 0.001}
QWEN_MASK_EMBEDDER = ("controlnet_x_embedder.weight", 68)  # the InstantX Inpainting ControlNet's hint embedder width


def takes_mask(control_net) -> bool:
    """Whether the ControlNet joins a mask to its hint (read from its file's header, not its weights)."""
    if control_net.arch != "qwen_image" or not control_net.sources:
        return False
    shape = shapes_of(control_net.sources[0])[0].get(QWEN_MASK_EMBEDDER[0])
    return shape is not None and shape[1] == QWEN_MASK_EMBEDDER[1]


def masked_hint(image: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """ComfyUI's inpainting hint: the image where it is kept, and the kept area [B,1,H,W] at the mask's size."""
    keep = 1.0 - mask.reshape(-1, 1, mask.shape[-2], mask.shape[-1])
    if keep.shape[0] != image.shape[0] and 1 not in (keep.shape[0], image.shape[0]):
        raise ValueError(f"mask: a batch of {keep.shape[0]} masks for a batch of {image.shape[0]} images")
    apply = resize_hint(keep.movedim(1, -1), image.shape[1], image.shape[2], mode="bilinear").round()
    return image * apply.movedim(1, -1), keep


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
        if not takes_mask(control_net):
            hint_vae = vae if control_net.arch in LATENT_HINT_ARCHS else None
            return self.apply_controlnet(
                positive, negative, control_net, image, strength, start_percent, end_percent, vae=hint_vae
            )
        positive, negative = require(positive, "positive"), require(negative, "negative")
        if strength == 0:
            return (positive, negative)
        control_net = with_hint_vae(control_net, require_component(vae, "vae", "vae"))
        hint, keep = masked_hint(check_hint(image), mask.float())
        shared: dict = {}
        return (
            apply_control(positive, control_net, hint, strength, start_percent, end_percent, shared, keep),
            apply_control(negative, control_net, hint, strength, start_percent, end_percent, shared, keep),
        )


NODE_CLASS_MAPPINGS = {"ControlNetInpaintingAliMamaApply": ControlNetInpaintingAliMamaApply}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
