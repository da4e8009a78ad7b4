"""ComfyUI's comfy_extras.nodes_easycache: LazyCache. Around the whole guided prediction of a step, it
estimates how much the prediction will change from how much the input changed (the last measured ratio of
output change to input change, relative to the output's size), accumulates that estimate, and while the sum
stays under `reuse_threshold` skips the model: the prediction is the input plus the last computed
(prediction - input). Only between start_percent and end_percent of the schedule.

ComfyUI keeps this state in a holder object for the sampling run; here it is part of the step's sampler state
(`lazycache.*` tensors), so it travels with the steps to whichever executor runs them. EasyCache, the per-cond
variant inside the diffusion model's forward, is not offered (comfy_bridge.nodes_doc says why)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

import torch

from cluster.refs import ModelRef
from nodes.modelfns.model_options import sampling_config, with_function
from nodes.modelfns.network_patches import PREDICT_NOISE
from nodes.sampling.model_sampling import model_sampling_from_config

MODULE = "comfy_extras.nodes_easycache"
log = logging.getLogger(__name__)
SUBSAMPLE = 8          # change rates are measured on every 8th latent pixel per axis, as ComfyUI does
PREFIX = "lazycache."
X_PREV, OUT_PREV, OUT_NORM, DIFF, RATE, TOTAL, SKIPPED = (PREFIX + k for k in (
    "x_prev", "out_prev", "out_norm", "diff", "rate", "cumulative", "skipped"))


def _sub(x: torch.Tensor) -> torch.Tensor:
    return x[..., ::SUBSAMPLE, ::SUBSAMPLE]


def _mean_abs(t: torch.Tensor) -> torch.Tensor:
    return t.flatten().abs().mean()


@dataclass(frozen=True)
class LazyCacheWrapper:
    reuse_threshold: float
    start_sigma: float
    end_sigma: float
    verbose: bool

    def __call__(self, predict: Callable, x: torch.Tensor, sigma: torch.Tensor,
                 state: dict[str, torch.Tensor]) -> torch.Tensor:
        s = sigma.reshape(-1)[0]
        if not bool(s > self.end_sigma):
            return predict(x, sigma)
        input_change = None
        if bool(s <= self.start_sigma):
            diff = state.get(DIFF)
            if diff is not None and (diff.shape, diff.dtype, diff.device) != (x.shape, x.dtype, x.device):
                log.warning("LazyCache - tensor shape, dtype or device changed, resetting state")
                for key in (X_PREV, OUT_PREV, OUT_NORM, DIFF, TOTAL, SKIPPED):
                    state.pop(key, None)
                state[RATE] = torch.tensor(0.0)     # ComfyUI's reset leaves a rate of 0, not none
            if X_PREV in state:
                input_change = _mean_abs(_sub(x) - state[X_PREV])
                if OUT_NORM in state and RATE in state:
                    total = state.get(TOTAL, torch.tensor(0.0)) + state[RATE] * input_change / state[OUT_NORM]
                    if bool(total < self.reuse_threshold):
                        state[TOTAL] = total
                        state[SKIPPED] = state.get(SKIPPED, torch.tensor(0)) + 1
                        if self.verbose:
                            log.info("LazyCache - skipping step; cumulative change rate %s", float(total))
                        return x + state[DIFF].to(x.device)
                    state[TOTAL] = torch.tensor(0.0)
        out = predict(x, sigma)
        if OUT_NORM in state and input_change is not None:
            state[RATE] = _mean_abs(_sub(out) - state[OUT_PREV]) / input_change
        state[DIFF] = out - x
        state[X_PREV] = _sub(x).clone()
        state[OUT_PREV] = _sub(out).clone()
        state[OUT_NORM] = _mean_abs(out)
        return out


class LazyCache:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "advanced/debug/model"
    EXPERIMENTAL = True
    DESCRIPTION = ("Skips the model on steps whose prediction is estimated to change little, reusing the last "
                   "prediction's offset from the input.")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "model": ("MODEL", {"tooltip": "The model to add LazyCache to."}),
            "reuse_threshold": ("FLOAT", {"default": 0.2, "min": 0.0, "max": 3.0, "step": 0.01,
                                          "tooltip": "How much estimated change may accumulate before the model "
                                                     "runs again."}),
            "start_percent": ("FLOAT", {"default": 0.15, "min": 0.0, "max": 1.0, "step": 0.01,
                                        "tooltip": "Where in the schedule caching begins."}),
            "end_percent": ("FLOAT", {"default": 0.95, "min": 0.0, "max": 1.0, "step": 0.01,
                                      "tooltip": "Where in the schedule caching ends."}),
            "verbose": ("BOOLEAN", {"default": False, "tooltip": "Log each decision."}),
        }}

    def patch(self, model: Any, reuse_threshold: float, start_percent: float, end_percent: float,
              verbose: bool) -> tuple[ModelRef]:
        if not isinstance(model, ModelRef) or model.component != "diffusion_model":
            raise ValueError(f"model: expected a MODEL, got {type(model).__name__}")
        ms = model_sampling_from_config(sampling_config(model))
        wrapper = LazyCacheWrapper(float(reuse_threshold), float(ms.percent_to_sigma(start_percent)),
                                   float(ms.percent_to_sigma(end_percent)), bool(verbose))
        return (with_function(model, PREDICT_NOISE, wrapper),)


NODE_CLASS_MAPPINGS = {"LazyCache": LazyCache}
NODE_DISPLAY_NAME_MAPPINGS = {"LazyCache": "LazyCache"}
