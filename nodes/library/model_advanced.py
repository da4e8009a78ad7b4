"""ComfyUI's comfy_extras.nodes_model_advanced: the ModelSampling* nodes and RescaleCFG, as data on the MODEL.

A ModelSampling node replaces the MODEL's sigma table and parameterisation (a model-sampling config, see
nodes.sampling.model_sampling); RescaleCFG adds a guidance function. The weights are untouched: the denoise
steps load the plain model (nodes.modelfns.model_options). ModelSamplingContinuousEDM's edm_playground_v2.5
also swaps the latent format sampling uses (a MODEL option too). ModelComputeDtype names the dtype the denoise
step runs the network in (a MODEL option; the executor casts a copy of the loaded network).
ModelAttentionBackend chooses the dense attention: only PyTorch's is offered here (ComfyUI's INT8 Comfy Kitchen
attention is not implemented), so the model passes on unchanged and another backend named falls back to it, as
ComfyUI does where that backend is unavailable.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_model
from nodes.modelfns.model_options import DTYPE, LATENT, sampling_config, with_function, with_sampling

MODULE = "comfy_extras.nodes_model_advanced"
MAX_RESOLUTION = 16384
DISCRETE_SAMPLINGS = ["eps", "v_prediction", "lcm", "x0", "img_to_img"]
_PREDICTION = {"eps": "eps", "v_prediction": "v", "lcm": "lcm", "x0": "x0", "img_to_img": "img_to_img"}
_BETA_KEYS = ("beta_schedule", "linear_start", "linear_end", "timesteps")


def _shift(default: float) -> tuple:
    return (
        "FLOAT",
        {
            "default": default,
            "min": 0.0,
            "max": 100.0,
            "step": 0.01,
            "tooltip": "Time shift: higher values spend more of the schedule at high noise.",
        },
    )


class _Patch:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "advanced/model"


class ModelSamplingDiscrete(_Patch):
    DESCRIPTION = (
        "Samples the model as a 1000-step discrete (DDPM) model with the chosen prediction type, "
        "optionally rescaled to zero terminal SNR."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "sampling": (DISCRETE_SAMPLINGS, {"tooltip": "What the network predicts."}),
                "zsnr": ("BOOLEAN", {"default": False, "tooltip": "Rescale the betas to zero terminal SNR."}),
            }
        }

    def patch(self, model: Any, sampling: str, zsnr: bool) -> tuple[ModelRef]:
        model = require_model(model)
        if sampling not in _PREDICTION:
            raise ValueError(f"sampling: unknown value {sampling!r}")
        # The beta schedule stays the model's own (ComfyUI reads its model_config); flow models get the
        # DDPM defaults.
        base = (
            {k: v for k, v in sampling_config(model).items() if k in _BETA_KEYS}
            if sampling_config(model).get("kind", "discrete") == "discrete"
            else {}
        )
        return (
            with_sampling(model, {**base, "kind": "discrete", "prediction": _PREDICTION[sampling], "zsnr": bool(zsnr)}),
        )


class ModelSamplingStableCascade(_Patch):
    DESCRIPTION = "Samples the model with Stable Cascade's shifted cosine schedule."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",), "shift": _shift(2.0)}}

    def patch(self, model: Any, shift: float) -> tuple[ModelRef]:
        return (with_sampling(require_model(model), {"kind": "stable_cascade", "shift": float(shift)}),)


AURA_SAMPLINGS = ("flow", "img_to_img_velocity")


class ModelSamplingSD3(_Patch):
    DESCRIPTION = "Samples the model as a rectified-flow model (SD3's schedule) with the given time shift."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",), "shift": _shift(3.0)}}

    def patch(self, model: Any, shift: float, multiplier: float = 1000, sampling: str = "flow") -> tuple[ModelRef]:
        model = require_model(model)
        if sampling not in AURA_SAMPLINGS:
            raise ValueError(f"sampling: unknown value {sampling!r} (one of {', '.join(AURA_SAMPLINGS)})")
        prediction = "const" if sampling == "flow" else sampling
        config = {"kind": "flow", "prediction": prediction, "shift": float(shift), "multiplier": float(multiplier)}
        noise_scale = sampling_config(model).get("noise_scale")
        if noise_scale is not None:  # a ModelNoiseScale before it stays in force, as in today's ComfyUI
            config["noise_scale"] = noise_scale
        return (with_sampling(model, config),)


class ModelSamplingAuraFlow(ModelSamplingSD3):
    DESCRIPTION = "Samples the model as a rectified-flow model with AuraFlow's timesteps (0..1) and time shift."
    FUNCTION = "patch_aura"

    @classmethod
    def INPUT_TYPES(cls):
        # `sampling` is today's ComfyUI's (Marigold V2's templates set img_to_img_velocity); 0.3.64 has no such input
        return {
            "required": {"model": ("MODEL",), "shift": _shift(1.73)},
            "optional": {"sampling": (list(AURA_SAMPLINGS), {"default": "flow", "advanced": True})},
        }

    def patch_aura(self, model: Any, shift: float, sampling: str = "flow") -> tuple[ModelRef]:
        return self.patch(model, shift, multiplier=1.0, sampling=sampling)


class ModelSamplingFlux(_Patch):
    DESCRIPTION = (
        "Samples the model with Flux's schedule, its shift interpolated from the image size "
        "between base_shift (256 tokens) and max_shift (4096 tokens)."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "max_shift": ("FLOAT", {"default": 1.15, "min": 0.0, "max": 100.0, "step": 0.01}),
                "base_shift": ("FLOAT", {"default": 0.5, "min": 0.0, "max": 100.0, "step": 0.01}),
                "width": ("INT", {"default": 1024, "min": 16, "max": MAX_RESOLUTION, "step": 8}),
                "height": ("INT", {"default": 1024, "min": 16, "max": MAX_RESOLUTION, "step": 8}),
            }
        }

    def patch(self, model: Any, max_shift: float, base_shift: float, width: int, height: int) -> tuple[ModelRef]:
        x1, x2 = 256, 4096
        slope = (max_shift - base_shift) / (x2 - x1)
        shift = (width * height / (8 * 8 * 2 * 2)) * slope + (base_shift - slope * x1)
        return (with_sampling(require_model(model), {"kind": "flux", "prediction": "const", "shift": shift}),)


class ModelSamplingContinuousV(_Patch):
    DESCRIPTION = "Samples the model as a continuous-time v-prediction model between sigma_min and sigma_max."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "sampling": (["v_prediction"],),
                "sigma_max": ("FLOAT", {"default": 500.0, "min": 0.0, "max": 1000.0, "step": 0.001, "round": False}),
                "sigma_min": ("FLOAT", {"default": 0.03, "min": 0.0, "max": 1000.0, "step": 0.001, "round": False}),
            }
        }

    def patch(self, model: Any, sampling: str, sigma_max: float, sigma_min: float) -> tuple[ModelRef]:
        if sampling != "v_prediction":
            raise ValueError(f"sampling: unknown value {sampling!r}")
        return (
            with_sampling(
                require_model(model),
                {
                    "kind": "continuous_v",
                    "prediction": "v",
                    "sigma_min": float(sigma_min),
                    "sigma_max": float(sigma_max),
                    "sigma_data": 1.0,
                },
            ),
        )


# ModelSamplingContinuousEDM's options -> (model-sampling kind, parameterisation, sigma_data, latent format)
_EDM_SAMPLINGS: dict[str, tuple[str, str, float, str | None]] = {
    "v_prediction": ("continuous_edm", "v", 1.0, None),
    "edm": ("continuous_edm", "edm", 0.5, None),
    "edm_playground_v2.5": ("continuous_edm", "edm", 0.5, "sdxl_playground_2_5"),
    "eps": ("continuous_edm", "eps", 1.0, None),
    "cosmos_rflow": ("cosmos_rflow", "cosmos_rflow", 1.0, None),
}


class ModelSamplingContinuousEDM(_Patch):
    DESCRIPTION = (
        "Samples the model as a continuous-time model with 1000 noise levels log-spaced between "
        "sigma_min and sigma_max, in the chosen parameterisation (EDM, v, eps, Cosmos' flow); "
        "edm_playground_v2.5 also uses Playground v2.5's latent format."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "sampling": (list(_EDM_SAMPLINGS),),
                "sigma_max": ("FLOAT", {"default": 120.0, "min": 0.0, "max": 1000.0, "step": 0.001, "round": False}),
                "sigma_min": ("FLOAT", {"default": 0.002, "min": 0.0, "max": 1000.0, "step": 0.001, "round": False}),
            }
        }

    def patch(self, model: Any, sampling: str, sigma_max: float, sigma_min: float) -> tuple[ModelRef]:
        model = require_model(model)
        if sampling not in _EDM_SAMPLINGS:
            raise ValueError(f"sampling: unknown value {sampling!r}")
        kind, prediction, sigma_data, latent = _EDM_SAMPLINGS[sampling]
        model = with_sampling(
            model,
            {
                "kind": kind,
                "prediction": prediction,
                "sigma_min": float(sigma_min),
                "sigma_max": float(sigma_max),
                "sigma_data": sigma_data,
            },
        )
        return (model.with_option(LATENT, latent) if latent is not None else model,)


@dataclass(frozen=True)
class RescaleCfgFunction:
    """Lin et al. 2023's CFG rescale, done on the v-prediction view of both sides: the guided v is rescaled
    to the positive side's standard deviation and mixed with the plain one by `multiplier`."""

    multiplier: float

    def __call__(self, args: dict) -> torch.Tensor:
        cond, uncond, scale, x_orig = args["cond"], args["uncond"], args["cond_scale"], args["input"]
        sigma = args["sigma"]
        sigma = sigma.view(sigma.shape[:1] + (1,) * (cond.ndim - 1))
        x = x_orig / (sigma * sigma + 1.0)
        v_cond = ((x - (x_orig - cond)) * (sigma**2 + 1.0) ** 0.5) / sigma
        v_uncond = ((x - (x_orig - uncond)) * (sigma**2 + 1.0) ** 0.5) / sigma
        v_cfg = v_uncond + scale * (v_cond - v_uncond)
        dims = tuple(range(1, cond.ndim))
        rescaled = v_cfg * (torch.std(v_cond, dim=dims, keepdim=True) / torch.std(v_cfg, dim=dims, keepdim=True))
        v_final = self.multiplier * rescaled + (1.0 - self.multiplier) * v_cfg
        return x_orig - (x - v_final * sigma / (sigma * sigma + 1.0) ** 0.5)


class RescaleCFG(_Patch):
    DESCRIPTION = "Rescales the guided prediction towards the positive prediction's spread (less overexposure)."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "multiplier": (
                    "FLOAT",
                    {
                        "default": 0.7,
                        "min": 0.0,
                        "max": 1.0,
                        "step": 0.01,
                        "tooltip": "0: plain CFG, 1: fully rescaled.",
                    },
                ),
            }
        }

    def patch(self, model: Any, multiplier: float) -> tuple[ModelRef]:
        return (with_function(require_model(model), "sampler_cfg_function", RescaleCfgFunction(float(multiplier))),)


# ComfyUI's string_to_torch_dtype; "default" (None) computes in the weights' dtype.
_DTYPES = {"default": None, "fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


class ModelComputeDtype(_Patch):
    CATEGORY = "advanced/debug/model"
    DESCRIPTION = "Runs the diffusion model in another precision; the weights are cast for the computation only."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"model": ("MODEL",), "dtype": (list(_DTYPES), {"tooltip": "default: the weights' own dtype."})}
        }

    def patch(self, model: Any, dtype: str) -> tuple[ModelRef]:
        if dtype not in _DTYPES:
            raise ValueError(f"dtype: expected one of {list(_DTYPES)}, got {dtype!r}")
        model = require_model(model)
        if _DTYPES[dtype] is None:  # a later "default" undoes an earlier ModelComputeDtype, as in ComfyUI
            return (replace(model, options=tuple((k, v) for k, v in model.options if k != DTYPE)),)
        return (model.with_option(DTYPE, _DTYPES[dtype]),)


class ModelAttentionBackend(_Patch):
    CATEGORY = "model/patch"
    EXPERIMENTAL = True
    RETURN_NAMES = ("model",)
    OUTPUT_TOOLTIPS = ("The model with the chosen attention.",)
    DESCRIPTION = "Chooses the model's dense attention implementation; PyTorch's is the one available here."
    BACKENDS = ["pytorch attention"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {"tooltip": "The model to patch."}),
                "attention": (
                    "COMBO",
                    {
                        "display_name": "backend",
                        "default": "pytorch attention",
                        "multiselect": False,
                        "options": cls.BACKENDS,
                        "tooltip": "The dense attention implementation.",
                    },
                ),
            }
        }

    @classmethod
    def VALIDATE_INPUTS(cls, attention: str) -> bool:
        return True  # a workflow made where another backend exists still runs: that backend falls back below

    def patch(self, model: Any, attention: str) -> tuple[ModelRef]:
        model = require_model(model)
        if attention not in self.BACKENDS:
            logging.getLogger(__name__).warning(
                "Attention backend %r is unavailable; using PyTorch attention.", attention
            )
        return (model,)


NODE_CLASS_MAPPINGS = {
    "ModelAttentionBackend": ModelAttentionBackend,
    "ModelSamplingDiscrete": ModelSamplingDiscrete,
    "ModelSamplingContinuousV": ModelSamplingContinuousV,
    "ModelSamplingContinuousEDM": ModelSamplingContinuousEDM,
    "ModelSamplingStableCascade": ModelSamplingStableCascade,
    "ModelSamplingSD3": ModelSamplingSD3,
    "ModelSamplingAuraFlow": ModelSamplingAuraFlow,
    "ModelSamplingFlux": ModelSamplingFlux,
    "RescaleCFG": RescaleCFG,
    "ModelComputeDtype": ModelComputeDtype,
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {"ModelAttentionBackend": "Model Attention Backend"}
