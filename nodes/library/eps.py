"""ComfyUI's comfy_extras.nodes_eps: Epsilon Scaling (Ning et al., "Elucidating the Exposure Bias in Diffusion
Models", uniform schedule) and Temporal Score Rescaling (arXiv 2510.01184), post-CFG functions carried on the
MODEL (nodes.modelfns.model_options)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_model
from nodes.modelfns.model_options import with_function
from nodes.sampling.sampler_base import half_log_snr

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
        return {
            "required": {
                "model": ("MODEL", {}),
                "scaling_factor": (
                    "FLOAT",
                    {"default": 1.005, "min": 0.5, "max": 1.5, "step": 0.001, "display": "number"},
                ),
            }
        }

    def patch(self, model: Any, scaling_factor: float) -> tuple[ModelRef]:
        require_model(model)
        factor = 1e-9 if scaling_factor == 0 else float(scaling_factor)  # as ComfyUI guards the division
        return (with_function(model, "sampler_post_cfg_function", EpsilonScalingFunction(factor)),)


@dataclass(frozen=True)
class TemporalScoreRescalingFunction:
    """Moves the guided prediction toward the noisy input scaled to the clean signal (x / alpha) by the factor
    r = (snr * sigma_tsr^2 + 1) / (snr * sigma_tsr^2 / k + 1): r is k at no noise and 1 at pure noise."""

    k: float
    variance: float

    def __call__(self, args: dict) -> torch.Tensor:
        denoised, x, sigma = args["denoised"], args["input"], args["sigma"]
        if self.k == 1:
            return denoised
        lam = half_log_snr(sigma, args["model"].model_sampling)
        snr = (2 * lam).exp()
        r = (snr * self.variance + 1) / (snr * self.variance / self.k + 1)
        r = torch.where(torch.isposinf(snr), torch.full_like(r, self.k), r)
        # each sample's sigma along its own batch row (ComfyUI's code assumes a batch of one)
        shape = (-1,) + (1,) * (x.ndim - 1)
        alpha, r = (sigma * lam.exp()).reshape(shape), r.reshape(shape)
        # no rescaling where there is no noise (sigma 0) or nothing but noise (snr 0)
        keep = ((sigma == 0) | (snr == 0)).reshape(shape)
        return torch.where(keep, denoised, torch.lerp(x / alpha, denoised, r))


class TemporalScoreRescaling:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    RETURN_NAMES = ("patched_model",)
    OUTPUT_TOOLTIPS = (None,)
    FUNCTION = "patch"
    CATEGORY = "model_patches/unet"
    DESCRIPTION = (
        "Temporal Score Rescaling: rescales each step's prediction to trade detail (k below 1) for "
        "smoothness (k above 1); k = 1 leaves sampling unchanged."
    )

    @classmethod
    def INPUT_TYPES(cls):
        number = {"min": 0.01, "max": 100.0, "step": 0.001, "display": "number"}
        return {
            "required": {
                "model": ("MODEL", {}),
                "tsr_k": (
                    "FLOAT",
                    {
                        "default": 0.95,
                        **number,
                        "tooltip": "Rescaling strength: below 1 more detail, above 1 smoother, 1 off.",
                    },
                ),
                "tsr_sigma": (
                    "FLOAT",
                    {
                        "default": 1.0,
                        **number,
                        "tooltip": "How early in sampling the rescaling acts (larger: earlier).",
                    },
                ),
            }
        }

    def patch(self, model: Any, tsr_k: float, tsr_sigma: float) -> tuple[ModelRef]:
        require_model(model)
        fn = TemporalScoreRescalingFunction(float(tsr_k), float(tsr_sigma) ** 2)
        return (with_function(model, "sampler_post_cfg_function", fn),)


NODE_CLASS_MAPPINGS = {"Epsilon Scaling": EpsilonScaling, "TemporalScoreRescaling": TemporalScoreRescaling}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {"TemporalScoreRescaling": "TSR - Temporal Score Rescaling"}
