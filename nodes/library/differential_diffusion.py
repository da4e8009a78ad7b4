"""ComfyUI's comfy_extras.nodes_differential_diffusion: inpainting where each pixel of a soft mask starts
being denoised at its own step, carried on the MODEL as a denoise-mask function (applied in each denoise
step, nodes.modelfns.denoise.GuidedDenoiser)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_model
from nodes.modelfns.model_options import with_function


@dataclass(frozen=True)
class DifferentialDiffusionFunction:
    """The mask thresholded at the step's position along the schedule (in timesteps, from its first sigma to
    its last, or the model's smallest): a pixel takes part once the schedule has come down to its mask value.
    strength < 1 blends the thresholded mask with the soft one."""

    strength: float

    def __call__(self, sigma: torch.Tensor, denoise_mask: torch.Tensor, extra_options: dict) -> torch.Tensor:
        ms = extra_options["model"].inner_model.model_sampling
        sigmas = extra_options["sigmas"]
        sigma_to = ms.sigma_min
        if sigmas[-1] > sigma_to:
            sigma_to = sigmas[-1]
        ts_from, ts_to = ms.timestep(sigmas[0]), ms.timestep(sigma_to)
        threshold = (ms.timestep(sigma[0]) - ts_to) / (ts_from - ts_to)
        binary = (denoise_mask >= threshold).to(denoise_mask.dtype)
        if self.strength and self.strength < 1:
            return self.strength * binary + (1 - self.strength) * denoise_mask
        return binary


class DifferentialDiffusion:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_differential_diffusion"
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "apply"
    CATEGORY = "_for_testing"
    EXPERIMENTAL = True
    DESCRIPTION = (
        "Soft-mask inpainting: each pixel joins the denoising when the noise level falls to its mask "
        "value, so mask gradients become gradual transitions."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"model": ("MODEL", {})},
            "optional": {
                "strength": (
                    "FLOAT",
                    {
                        "default": 1.0,
                        "min": 0.0,
                        "max": 1.0,
                        "step": 0.01,
                        "tooltip": "1: the thresholded mask; less blends in the soft mask.",
                    },
                )
            },
        }

    def apply(self, model: Any, strength: float = 1.0) -> tuple[ModelRef]:
        require_model(model)
        return (with_function(model, "denoise_mask_function", DifferentialDiffusionFunction(float(strength))),)


NODE_CLASS_MAPPINGS = {"DifferentialDiffusion": DifferentialDiffusion}
NODE_DISPLAY_NAME_MAPPINGS = {"DifferentialDiffusion": "Differential Diffusion"}
