"""ComfyUI's comfy_extras.nodes_eps: Epsilon Scaling (Ning et al., "Elucidating the Exposure Bias in Diffusion
Models", uniform schedule), a post-CFG function carried on the MODEL (nodes.modelfns.model_options)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.modelfns.model_options import with_function
from nodes.inputs import require_model

MODULE = "comfy_extras.nodes_eps"


@dataclass(frozen=True)
class EpsilonScalingFunction:
    """Divides the guided noise estimate (input - denoised) by the scaling factor."""
    scaling_factor: float

    def __call__(self, args: dict) -> torch.Tensor:
        x = args["input"]
        return x - (x - args["denoised"]) / self.scaling_factor


class EpsilonScaling:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "model_patches/unet"
    DESCRIPTION = "Scales down the predicted noise each step to counter exposure bias (factor slightly above 1)."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL", {}),
                             "scaling_factor": ("FLOAT", {"default": 1.005, "min": 0.5, "max": 1.5, "step": 0.001,
                                                          "display": "number"})}}

    def patch(self, model: Any, scaling_factor: float) -> tuple[ModelRef]:
        require_model(model)
        factor = 1e-9 if scaling_factor == 0 else float(scaling_factor)   # as ComfyUI guards the division
        return (with_function(model, "sampler_post_cfg_function", EpsilonScalingFunction(factor)),)


NODE_CLASS_MAPPINGS = {"Epsilon Scaling": EpsilonScaling}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
