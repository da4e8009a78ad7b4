"""ComfyUI's comfy_extras.nodes_pag: Perturbed-Attention Guidance. A post-CFG function carried on the MODEL
runs the positive prompt a second time with the middle block's self-attention replaced by identity
attention (each token attends only to itself, so the output is its value) and pushes the guided result
away from that prediction: result + (cond - perturbed) * scale."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_model
from nodes.modelfns.model_options import with_function
from nodes.modelfns.network_patches import CALC_COND, with_extra

MODULE = "comfy_extras.nodes_pag"
BLOCK = ("middle", 0)


@dataclass(frozen=True)
class IdentityAttention:
    """attn1 replacement: the attention output is the value projection."""

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, options: dict) -> torch.Tensor:
        return v


@dataclass(frozen=True)
class PerturbedAttentionFunction:
    scale: float

    def __call__(self, args: dict) -> torch.Tensor:
        if self.scale == 0:
            return args["denoised"]
        options = with_extra(args["model_options"], (("attn1_replace", BLOCK, IdentityAttention()),))
        (perturbed,) = options[CALC_COND](args["model"], [args["cond"]], args["input"], args["sigma"], options)
        return args["denoised"] + (args["cond_denoised"] - perturbed) * self.scale


class PerturbedAttentionGuidance:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "model_patches/unet"
    DESCRIPTION = (
        "Perturbed-Attention Guidance: guides away from a prediction made with the middle block's "
        "self-attention disabled, sharpening structure."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "scale": ("FLOAT", {"default": 3.0, "min": 0.0, "max": 100.0, "step": 0.01, "round": 0.01}),
            }
        }

    def patch(self, model: Any, scale: float) -> tuple[ModelRef]:
        require_model(model)
        return (with_function(model, "sampler_post_cfg_function", PerturbedAttentionFunction(float(scale))),)


NODE_CLASS_MAPPINGS = {"PerturbedAttentionGuidance": PerturbedAttentionGuidance}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
