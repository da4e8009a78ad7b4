"""Core CONDITIONING nodes that need no model: combine, concat, average, zero out, timestep range, Flux guidance.

CONDITIONING is a list of entries `[tensor [B,T,D], options]`; nodes never mutate their input,
they build new entries with copied option dicts.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

log = logging.getLogger(__name__)
MAX_RESOLUTION = 16384


def set_values(conditioning: list, values: dict[str, Any]) -> list:
    """A copy of `conditioning` with `values` written into every entry's options."""
    return [[cond, {**opts, **values}] for cond, opts in conditioning]


def _first_from(conditioning_from: list, node: str) -> list:
    if len(conditioning_from) > 1:
        log.warning("%s: conditioning_from has %d entries; only the first is used.", node, len(conditioning_from))
    return conditioning_from[0]


class ConditioningCombine:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"conditioning_1": ("CONDITIONING",), "conditioning_2": ("CONDITIONING",)}}

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "combine"
    CATEGORY = "conditioning"
    DESCRIPTION = "Joins two conditionings into one list; the sampler averages their predictions."

    def combine(self, conditioning_1: list, conditioning_2: list):
        return (conditioning_1 + conditioning_2,)


class ConditioningAverage:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "conditioning_to": ("CONDITIONING",),
                "conditioning_from": ("CONDITIONING",),
                "conditioning_to_strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.01}),
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "addWeighted"
    CATEGORY = "conditioning"
    DESCRIPTION = (
        "Blends the first entry of conditioning_from into each entry of conditioning_to, "
        "weighting conditioning_to by conditioning_to_strength."
    )

    def addWeighted(self, conditioning_to: list, conditioning_from: list, conditioning_to_strength: float):
        w = conditioning_to_strength
        cond_from, opts_from = _first_from(conditioning_from, "ConditioningAverage")
        pooled_from = opts_from.get("pooled_output")
        out = []
        for cond_to, opts_to in conditioning_to:
            # Match conditioning_from's token count to conditioning_to: truncate, or pad with zeros.
            src = cond_from[:, : cond_to.shape[1]]
            if src.shape[1] < cond_to.shape[1]:
                pad = src.new_zeros((src.shape[0], cond_to.shape[1] - src.shape[1], cond_to.shape[2]))
                src = torch.cat([src, pad], dim=1)
            opts = opts_to.copy()
            pooled_to = opts_to.get("pooled_output", pooled_from)
            if pooled_from is not None and pooled_to is not None:
                opts["pooled_output"] = pooled_to * w + pooled_from * (1.0 - w)
            elif pooled_from is not None:  # conditioning_to holds an explicit None
                opts["pooled_output"] = pooled_from
            out.append([cond_to * w + src * (1.0 - w), opts])
        return (out,)


class ConditioningConcat:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"conditioning_to": ("CONDITIONING",), "conditioning_from": ("CONDITIONING",)}}

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "concat"
    CATEGORY = "conditioning"
    DESCRIPTION = "Appends the tokens of conditioning_from's first entry to the tokens of every conditioning_to entry."

    def concat(self, conditioning_to: list, conditioning_from: list):
        cond_from = _first_from(conditioning_from, "ConditioningConcat")[0]
        return ([[torch.cat((cond, cond_from), 1), opts.copy()] for cond, opts in conditioning_to],)


class ConditioningZeroOut:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"conditioning": ("CONDITIONING",)}}

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "zero_out"
    CATEGORY = "advanced/conditioning"
    DESCRIPTION = "Replaces the embeddings (and pooled output) with zeros of the same shape."

    def zero_out(self, conditioning: list):
        out = []
        for cond, opts in conditioning:
            opts = opts.copy()
            for key in ("pooled_output", "conditioning_lyrics"):
                if opts.get(key) is not None:
                    opts[key] = torch.zeros_like(opts[key])
            out.append([torch.zeros_like(cond), opts])
        return (out,)


class ConditioningSetTimestepRange:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "conditioning": ("CONDITIONING",),
                "start": ("FLOAT", {"default": 0.0, "min": 0.0, "max": 1.0, "step": 0.001}),
                "end": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.001}),
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "set_range"
    CATEGORY = "advanced/conditioning"
    DESCRIPTION = "Limits the conditioning to a part of the sampling schedule (0 = first step, 1 = last)."

    def set_range(self, conditioning: list, start: float, end: float):
        return (set_values(conditioning, {"start_percent": start, "end_percent": end}),)


class FluxGuidance:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "conditioning": ("CONDITIONING",),
                "guidance": ("FLOAT", {"default": 3.5, "min": 0.0, "max": 100.0, "step": 0.1}),
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "append"
    CATEGORY = "advanced/conditioning/flux"
    DESCRIPTION = "Sets the guidance strength that guidance-distilled Flux models are conditioned on."
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_flux"

    def append(self, conditioning: list, guidance: float):
        return (set_values(conditioning, {"guidance": guidance}),)


NODE_CLASS_MAPPINGS = {
    "FluxGuidance": FluxGuidance,
    "ConditioningCombine": ConditioningCombine,
    "ConditioningAverage": ConditioningAverage,
    "ConditioningConcat": ConditioningConcat,
    "ConditioningZeroOut": ConditioningZeroOut,
    "ConditioningSetTimestepRange": ConditioningSetTimestepRange,
}

# ComfyUI's display-name table spells the ConditioningAverage key with a trailing space, so the
# class shows under its own name there; left out here to match.
NODE_DISPLAY_NAME_MAPPINGS = {
    "ConditioningCombine": "Conditioning (Combine)",
    "ConditioningConcat": "Conditioning (Concat)",
}
