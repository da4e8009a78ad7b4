"""ComfyUI's comfy_extras.nodes_cfg: CFGZeroStar and CFGNorm, post-CFG functions carried on the MODEL
(nodes.modelfns.model_options) and applied inside each denoise step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_model
from nodes.modelfns.model_options import with_function

MODULE = "comfy_extras.nodes_cfg"
POST_CFG = "sampler_post_cfg_function"


def optimized_scale(positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
    """CFG-Zero*'s per-sample s* = <v_cond, v_uncond> / ||v_uncond||^2 (1e-8 keeps it finite)."""
    pos, neg = positive.reshape(positive.shape[0], -1), negative.reshape(negative.shape[0], -1)
    dot = torch.sum(pos * neg, dim=1, keepdim=True)
    squared_norm = torch.sum(neg**2, dim=1, keepdim=True) + 1e-8
    return (dot / squared_norm).reshape([positive.shape[0]] + [1] * (positive.ndim - 1))


@dataclass(frozen=True)
class CfgZeroStarFunction:
    """Replaces the unconditional prediction by its s*-scaled version in the guided result."""

    def __call__(self, args: dict) -> torch.Tensor:
        scale, x = args["cond_scale"], args["input"]
        cond, uncond, out = args["cond_denoised"], args["uncond_denoised"], args["denoised"]
        alpha = optimized_scale(x - cond, x - uncond)
        return out + uncond * (alpha - 1.0) + scale * uncond * (1.0 - alpha)


@dataclass(frozen=True)
class CfgNormFunction:
    """Caps the guided prediction's per-pixel channel norm at the positive prediction's, times strength."""

    strength: float

    def __call__(self, args: dict) -> torch.Tensor:
        cond, guided = args["cond_denoised"], args["denoised"]
        scale = torch.norm(cond, dim=1, keepdim=True) / (torch.norm(guided, dim=1, keepdim=True) + 1e-8)
        return guided * scale.clamp(min=0.0, max=1.0) * self.strength


class CFGZeroStar:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    RETURN_NAMES = ("patched_model",)
    FUNCTION = "patch"
    CATEGORY = "advanced/guidance"
    DESCRIPTION = "CFG-Zero*: scales the unconditional prediction by its projection onto the conditional one."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL", {})}}

    def patch(self, model: Any) -> tuple[ModelRef]:
        return (with_function(require_model(model), POST_CFG, CfgZeroStarFunction()),)


class CFGNorm:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    RETURN_NAMES = ("patched_model",)
    FUNCTION = "patch"
    CATEGORY = "advanced/guidance"
    EXPERIMENTAL = True
    DESCRIPTION = "Limits the guided prediction's norm to the conditional prediction's, scaled by strength."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 100.0, "step": 0.01}),
            }
        }

    def patch(self, model: Any, strength: float) -> tuple[ModelRef]:
        return (with_function(require_model(model), POST_CFG, CfgNormFunction(float(strength))),)


NODE_CLASS_MAPPINGS = {"CFGZeroStar": CFGZeroStar, "CFGNorm": CFGNorm}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
