"""ComfyUI's comfy_extras.nodes_slg: skip-layer guidance for DiT models (Flux here). Chosen double and single
blocks are skipped (their input passes through) in an extra prediction:

- SkipLayerGuidanceDiT: a post-CFG function runs the positive prompt again with the blocks skipped and adds
  (cond - skipped) * scale, optionally rescaled towards the positive prediction's spread.
- SkipLayerGuidanceDiTSimple: the negative prediction is made with the blocks skipped. ComfyUI swaps in its
  own calc_cond_batch function; here a pre-CFG function replaces the negative side's prediction, so the
  negative prompt is also evaluated once plainly (its result is discarded) - the guided result is the same.

Both only act while sigma is within [start_percent, end_percent] of the schedule. The skips are dit_replace
network patches (nodes.modelfns.network_patches) used in those extra model calls only."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_model
from nodes.modelfns.model_options import sampling_config, with_function
from nodes.modelfns.network_patches import CALC_COND, with_extra
from nodes.sampling.model_sampling import model_sampling_from_config

MODULE = "comfy_extras.nodes_slg"
LAYERS = ("STRING", {"default": "7, 8, 9", "multiline": False})


@dataclass(frozen=True)
class SkipBlock:
    """dit_replace: the block's input is its output."""

    def __call__(self, args: dict, extra: dict) -> dict:
        return args


def skips(double: tuple[int, ...], single: tuple[int, ...]) -> tuple:
    return tuple(("dit_replace", ("double_block", i), SkipBlock()) for i in double) + tuple(
        ("dit_replace", ("single_block", i), SkipBlock()) for i in single
    )


def layer_numbers(text: str) -> tuple[int, ...]:
    """Every run of digits in the text is a block index (ComfyUI's parsing: "7, 8, 9", "7 8;9" alike)."""
    return tuple(int(n) for n in re.findall(r"\d+", text))


@dataclass(frozen=True)
class SkipLayerGuidanceFunction:
    double: tuple[int, ...]
    single: tuple[int, ...]
    scale: float
    sigma_start: float
    sigma_end: float
    rescaling_scale: float

    def __call__(self, args: dict) -> torch.Tensor:
        out, cond = args["denoised"], args["cond_denoised"]
        s = float(args["sigma"][0])
        if self.scale > 0 and self.sigma_end <= s <= self.sigma_start:
            options = with_extra(args["model_options"], skips(self.double, self.single))
            (skipped,) = options[CALC_COND](args["model"], [args["cond"]], args["input"], args["sigma"], options)
            out = out + (cond - skipped) * self.scale
            if self.rescaling_scale != 0:
                factor = cond.std() / out.std()
                out = out * (self.rescaling_scale * factor + (1 - self.rescaling_scale))
        return out


@dataclass(frozen=True)
class SkipLayerUncondFunction:
    double: tuple[int, ...]
    single: tuple[int, ...]
    sigma_start: float
    sigma_end: float

    def __call__(self, args: dict) -> list:
        cond_out, uncond_out = args["conds_out"]
        uncond = args["conds"][1]
        s = float(args["sigma"][0])
        if uncond is not None and self.sigma_end <= s <= self.sigma_start:
            options = with_extra(args["model_options"], skips(self.double, self.single))
            _, uncond_out = options[CALC_COND](args["model"], [None, uncond], args["input"], args["sigma"], options)
        return [cond_out, uncond_out]


def _prepare(
    model: Any, start_percent: float, end_percent: float, double_layers: str, single_layers: str
) -> tuple[ModelRef, tuple[int, ...], tuple[int, ...], float, float]:
    require_model(model)
    ms = model_sampling_from_config(sampling_config(model))
    return (
        model,
        layer_numbers(double_layers),
        layer_numbers(single_layers),
        float(ms.percent_to_sigma(start_percent)),
        float(ms.percent_to_sigma(end_percent)),
    )


class SkipLayerGuidanceDiT:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "advanced/guidance"
    EXPERIMENTAL = True
    DESCRIPTION = (
        "Skip-layer guidance for DiT models: guides away from a prediction made with the given "
        "transformer blocks skipped."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "double_layers": LAYERS,
                "single_layers": LAYERS,
                "scale": ("FLOAT", {"default": 3.0, "min": 0.0, "max": 10.0, "step": 0.1}),
                "start_percent": ("FLOAT", {"default": 0.01, "min": 0.0, "max": 1.0, "step": 0.001}),
                "end_percent": ("FLOAT", {"default": 0.15, "min": 0.0, "max": 1.0, "step": 0.001}),
                "rescaling_scale": ("FLOAT", {"default": 0.0, "min": 0.0, "max": 10.0, "step": 0.01}),
            }
        }

    def patch(
        self,
        model: Any,
        double_layers: str,
        single_layers: str,
        scale: float,
        start_percent: float,
        end_percent: float,
        rescaling_scale: float,
    ) -> tuple[ModelRef]:
        model, double, single, start, end = _prepare(model, start_percent, end_percent, double_layers, single_layers)
        if not double and not single:
            return (model,)
        fn = SkipLayerGuidanceFunction(double, single, float(scale), start, end, float(rescaling_scale))
        return (with_function(model, "sampler_post_cfg_function", fn),)


class SkipLayerGuidanceDiTSimple:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "advanced/guidance"
    EXPERIMENTAL = True
    DESCRIPTION = (
        "Skip-layer guidance, simple form: the negative prediction is made with the given transformer blocks skipped."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "double_layers": LAYERS,
                "single_layers": LAYERS,
                "start_percent": ("FLOAT", {"default": 0.0, "min": 0.0, "max": 1.0, "step": 0.001}),
                "end_percent": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.001}),
            }
        }

    def patch(
        self, model: Any, double_layers: str, single_layers: str, start_percent: float, end_percent: float
    ) -> tuple[ModelRef]:
        model, double, single, start, end = _prepare(model, start_percent, end_percent, double_layers, single_layers)
        if not double and not single:
            return (model,)
        return (with_function(model, "sampler_pre_cfg_function", SkipLayerUncondFunction(double, single, start, end)),)


NODE_CLASS_MAPPINGS = {
    "SkipLayerGuidanceDiT": SkipLayerGuidanceDiT,
    "SkipLayerGuidanceDiTSimple": SkipLayerGuidanceDiTSimple,
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
