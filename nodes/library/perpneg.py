"""ComfyUI's comfy_extras.nodes_perpneg: Perp-Neg guidance as a GUIDER (PerpNegGuider) and as the deprecated
MODEL patch (PerpNeg).

PerpNegGuider: the empty prompt is the guider's third conditioning; the denoise step evaluates all three in
one batch (nodes.modelfns.denoise.GuidedDenoiser._perp_neg), so it runs one invocation per step like any guider.

PerpNeg: the MODEL carries the empty prompt (nodes.modelfns.model_options.with_conditioning; the sampling loop
passes its tensors as step inputs) and a CFG function that evaluates it through the step's calc_cond_batch
after the positive and negative predictions, then applies the same Perp-Neg formula."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.conditioning import require
from nodes.inputs import require_model
from nodes.ksampler import GuiderChoice
from nodes.modelfns.model_options import with_conditioning, with_function
from nodes.modelfns.model_patches import perp_neg
from nodes.modelfns.network_patches import CALC_COND

MODULE = "comfy_extras.nodes_perpneg"
EMPTY = "perp_neg_empty"  # the carried conditioning's name: its step inputs and model_options entry


@dataclass(frozen=True)
class PerpNegFunction:
    """sampler_cfg_function: the carried empty prompt's denoised prediction, then Perp-Neg guidance of the
    positive and negative predictions relative to it (returned as ComfyUI's x - denoised)."""

    neg_scale: float

    def __call__(self, args: dict) -> torch.Tensor:
        options, x, sigma = args["model_options"], args["input"], args["sigma"]
        (empty,) = options[CALC_COND](args["model"], [options[EMPTY]], x, sigma, options)
        return x - perp_neg(args["cond_denoised"], args["uncond_denoised"], empty, self.neg_scale, args["cond_scale"])


class PerpNeg:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "_for_testing"
    EXPERIMENTAL = True
    DEPRECATED = True
    DESCRIPTION = (
        "Perp-Neg guidance as a MODEL patch (superseded by PerpNegGuider): the sampler's cfg scales "
        "the positive prompt over the empty one, minus the negative's perpendicular part."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "empty_conditioning": ("CONDITIONING", {}),
                "neg_scale": (
                    "FLOAT",
                    {
                        "default": 1.0,
                        "min": 0.0,
                        "max": 100.0,
                        "step": 0.01,
                        "tooltip": "Weight of the negative prompt's perpendicular part.",
                    },
                ),
            }
        }

    def patch(self, model: Any, empty_conditioning: list, neg_scale: float) -> tuple[ModelRef]:
        model = with_conditioning(require_model(model), EMPTY, require(empty_conditioning, "empty_conditioning"))
        return (with_function(model, "sampler_cfg_function", PerpNegFunction(float(neg_scale))),)


class PerpNegGuider:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("GUIDER",)
    FUNCTION = "get_guider"
    CATEGORY = "_for_testing"
    EXPERIMENTAL = True
    DESCRIPTION = (
        "Perp-Neg guidance: guides away from the negative prompt only along the directions "
        "perpendicular to the positive one, measured from the empty prompt."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "positive": ("CONDITIONING", {}),
                "negative": ("CONDITIONING", {}),
                "empty_conditioning": ("CONDITIONING", {}),
                "cfg": (
                    "FLOAT",
                    {
                        "default": 8.0,
                        "min": 0.0,
                        "max": 100.0,
                        "step": 0.1,
                        "round": 0.01,
                        "tooltip": "Guidance scale of the positive prompt over the empty one.",
                    },
                ),
                "neg_scale": (
                    "FLOAT",
                    {
                        "default": 1.0,
                        "min": 0.0,
                        "max": 100.0,
                        "step": 0.01,
                        "tooltip": "Weight of the negative prompt's perpendicular part.",
                    },
                ),
            }
        }

    def get_guider(
        self, model: Any, positive: list, negative: list, empty_conditioning: list, cfg: float, neg_scale: float
    ) -> tuple[GuiderChoice]:
        return (
            GuiderChoice(
                require_model(model),
                require(positive, "positive"),
                require(negative, "negative"),
                float(cfg),
                kind="perp_neg",
                middle=require(empty_conditioning, "empty_conditioning"),
                cfg2=float(neg_scale),
            ),
        )


NODE_CLASS_MAPPINGS = {"PerpNeg": PerpNeg, "PerpNegGuider": PerpNegGuider}
NODE_DISPLAY_NAME_MAPPINGS = {"PerpNeg": "Perp-Neg (DEPRECATED by PerpNegGuider)"}
