"""ComfyUI's PerpNegGuider (comfy_extras.nodes_perpneg): Perp-Neg guidance as a GUIDER. The empty prompt is
the guider's third conditioning; the denoise step evaluates all three in one batch
(nodes.modelfns.denoise.GuidedDenoiser._perp_neg), so it runs one invocation per step like any guider.

The deprecated PerpNeg MODEL patch is not offered: its guidance function evaluates the model on a
conditioning carried inside the MODEL, which a MODEL (a ModelRef of plain options) does not carry."""
from __future__ import annotations

from typing import Any

from cluster.refs import ModelRef
from nodes.conditioning import require
from nodes.ksampler import GuiderChoice


class PerpNegGuider:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_perpneg"
    RETURN_TYPES = ("GUIDER",)
    FUNCTION = "get_guider"
    CATEGORY = "_for_testing"
    EXPERIMENTAL = True
    DESCRIPTION = ("Perp-Neg guidance: guides away from the negative prompt only along the directions "
                   "perpendicular to the positive one, measured from the empty prompt.")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "model": ("MODEL", {}), "positive": ("CONDITIONING", {}), "negative": ("CONDITIONING", {}),
            "empty_conditioning": ("CONDITIONING", {}),
            "cfg": ("FLOAT", {"default": 8.0, "min": 0.0, "max": 100.0, "step": 0.1, "round": 0.01,
                              "tooltip": "Guidance scale of the positive prompt over the empty one."}),
            "neg_scale": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 100.0, "step": 0.01,
                                    "tooltip": "Weight of the negative prompt's perpendicular part."})}}

    def get_guider(self, model: Any, positive: list, negative: list, empty_conditioning: list, cfg: float,
                   neg_scale: float) -> tuple[GuiderChoice]:
        if not isinstance(model, ModelRef) or model.component != "diffusion_model":
            raise ValueError(f"model: expected a MODEL, got {type(model).__name__}")
        return (GuiderChoice(model, require(positive, "positive"), require(negative, "negative"), float(cfg),
                             kind="perp_neg", middle=require(empty_conditioning, "empty_conditioning"),
                             cfg2=float(neg_scale)),)


NODE_CLASS_MAPPINGS = {"PerpNegGuider": PerpNegGuider}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
