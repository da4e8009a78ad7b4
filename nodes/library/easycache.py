"""ComfyUI's comfy_extras.nodes_easycache: LazyCache. Around the whole guided prediction of a step, it
estimates how much the prediction will change from how much the input changed (the last measured ratio of
output change to input change, relative to the output's size), accumulates that estimate, and while the sum
stays under `reuse_threshold` skips the model: the prediction is the input plus the last computed
(prediction - input). Only between start_percent and end_percent of the schedule.

ComfyUI keeps this state in a holder object for the sampling run; here it is part of the step's sampler state
(`lazycache.*` tensors), so it travels with the steps to whichever executor runs them.

EasyCache is the same estimate inside the diffusion model's forward passes (nodes.modelfns.network_patches
DIFFUSION_MODEL): the change rates are measured on one reference cond entry, the first of the first pass in
the caching window in ComfyUI's batch order (last member first), and each cond entry keeps its own
(output - input); once the reference decides to skip, every pass of that evaluation reuses its entries' cached
offsets. ComfyUI keys the entries by uuid; here by their conditioning key (`positive.0` ...), which every
executor sees alike, and the state is `easycache.*` sampler state."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_model
from nodes.modelfns.model_options import sampling_config, with_function
from nodes.modelfns.network_patches import DIFFUSION_MODEL, PREDICT_NOISE
from nodes.sampling.model_sampling import model_sampling_from_config

MODULE = "comfy_extras.nodes_easycache"
log = logging.getLogger(__name__)
SUBSAMPLE = 8  # change rates are measured on every 8th latent pixel per axis, as ComfyUI does
PREFIX = "lazycache."
X_PREV, OUT_PREV, OUT_NORM, DIFF, RATE, TOTAL, SKIPPED = (
    PREFIX + k for k in ("x_prev", "out_prev", "out_norm", "diff", "rate", "cumulative", "skipped")
)


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

    def __call__(
        self, predict: Callable, x: torch.Tensor, sigma: torch.Tensor, state: dict[str, torch.Tensor]
    ) -> torch.Tensor:
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
                state[RATE] = torch.tensor(0.0)  # ComfyUI's reset leaves a rate of 0, not none
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


def _inputs(name: str) -> dict:
    """The inputs LazyCache and EasyCache share."""
    return {
        "required": {
            "model": ("MODEL", {"tooltip": f"The model to add {name} to."}),
            "reuse_threshold": (
                "FLOAT",
                {
                    "default": 0.2,
                    "min": 0.0,
                    "max": 3.0,
                    "step": 0.01,
                    "tooltip": "How much estimated change may accumulate before the model runs again.",
                },
            ),
            "start_percent": (
                "FLOAT",
                {
                    "default": 0.15,
                    "min": 0.0,
                    "max": 1.0,
                    "step": 0.01,
                    "tooltip": "Where in the schedule caching begins.",
                },
            ),
            "end_percent": (
                "FLOAT",
                {
                    "default": 0.95,
                    "min": 0.0,
                    "max": 1.0,
                    "step": 0.01,
                    "tooltip": "Where in the schedule caching ends.",
                },
            ),
            "verbose": ("BOOLEAN", {"default": False, "tooltip": "Log each decision."}),
        }
    }


EC = "easycache."
EC_FIRST, EC_DIFF = EC + "first.", EC + "diff."  # + an entry's key: the reference marker, its cached offset
EC_X_PREV, EC_OUT_PREV, EC_OUT_NORM, EC_RATE, EC_TOTAL, EC_SKIPPED, EC_SHAPE = (
    EC + k for k in ("x_prev", "out_prev", "out_norm", "rate", "cumulative", "skipped", "shape")
)
EC_SKIP = EC + "skip"  # in the evaluation's scratch: the reference skipped this evaluation


def _reference(state: dict[str, torch.Tensor]) -> str | None:
    return next((k[len(EC_FIRST) :] for k in state if k.startswith(EC_FIRST)), None)


@dataclass(frozen=True)
class EasyCacheWrapper:
    """wrapper(forward, x, sigma, keys, state, evaluation) around one forward pass of the diffusion model: x
    holds len(keys) equal chunks, one per cond entry, in our batch order; `evaluation` is scratch shared by the
    passes of one guided prediction (ComfyUI's calc_cond_batch). With an image latent joined to the input
    (InstructPix2Pix), ComfyUI's wrapper sees the joined input and measures against its last channels; here x is
    the noisy latent alone."""

    reuse_threshold: float
    start_sigma: float
    end_sigma: float
    verbose: bool

    def __call__(
        self,
        forward: Callable,
        x: torch.Tensor,
        sigma: torch.Tensor,
        keys: list[str],
        state: dict[str, torch.Tensor],
        evaluation: dict[str, Any],
    ) -> torch.Tensor:
        s = sigma.reshape(-1)[0]
        if not bool(s > self.end_sigma):
            return forward(x)
        n = x.shape[0] // len(keys)
        first, input_change = _reference(state), None
        if bool(s <= self.start_sigma):
            shape = torch.tensor(x.shape[1:])
            if EC_SHAPE in state and not torch.equal(state[EC_SHAPE], shape):
                log.warning("EasyCache - tensor shape changed, resetting state")
                for key in [k for k in state if k.startswith(EC)]:
                    state.pop(key)
                state[EC_RATE] = torch.tensor(0.0)  # ComfyUI's reset leaves a rate of 0, not none
                evaluation.pop(EC_SKIP, None)
                first = None
            state[EC_SHAPE] = shape
            if evaluation.get(EC_SKIP):
                cached = self._cached(x, keys, state, first)
                if cached is not None:
                    return cached
            if first is None:
                first = keys[-1]  # ComfyUI's first uuid: it batches a pass's conds last-first
                state[EC_FIRST + first] = torch.tensor(1)
            if first in keys:
                if EC_X_PREV in state:
                    input_change = _mean_abs(self._sub(x, keys, first) - state[EC_X_PREV].to(x.device))
                if EC_OUT_NORM in state and EC_RATE in state:
                    total = state.get(EC_TOTAL, torch.tensor(0.0)) + state[EC_RATE] * input_change / state[EC_OUT_NORM]
                    state[EC_TOTAL] = total
                    if bool(total < self.reuse_threshold):
                        cached = self._cached(x, keys, state, first)
                        if cached is not None:
                            if self.verbose:
                                log.info("EasyCache - skipping step; cumulative change rate %s", float(total))
                            evaluation[EC_SKIP] = True
                            return cached
                    state[EC_TOTAL] = torch.tensor(0.0)
        out = forward(x)
        if first in keys and EC_OUT_NORM in state and input_change is not None:
            state[EC_RATE] = _mean_abs(self._sub(out, keys, first) - state[EC_OUT_PREV].to(x.device)) / input_change
        diff = out - x
        for i, key in enumerate(keys):
            state[EC_DIFF + key] = diff[i * n : (i + 1) * n]
        if first in keys:
            state[EC_X_PREV] = self._sub(x, keys, first).clone()
            state[EC_OUT_PREV] = self._sub(out, keys, first).clone()
            state[EC_OUT_NORM] = _mean_abs(out)
        return out

    @staticmethod
    def _sub(x: torch.Tensor, keys: list[str], first: str) -> torch.Tensor:
        """The reference entry's chunk, subsampled."""
        n, i = x.shape[0] // len(keys), keys.index(first)
        return _sub(x[i * n : (i + 1) * n])

    @staticmethod
    def _cached(
        x: torch.Tensor, keys: list[str], state: dict[str, torch.Tensor], first: str | None
    ) -> torch.Tensor | None:
        """The pass's input plus its entries' cached offsets; None where an entry has none yet (one that became
        active inside the window; ComfyUI fails there), so the model runs. ComfyUI adds every entry's offset to
        the whole input, in its batch order: with a batch of one each chunk gets the sum of all the pass's
        offsets, as here; with a larger batch and several entries ComfyUI fails, and each chunk gets its own."""
        diffs = [state.get(EC_DIFF + k) for k in reversed(keys)]
        if any(d is None for d in diffs):
            return None
        if first in keys:
            state[EC_SKIPPED] = state.get(EC_SKIPPED, torch.tensor(0)) + 1
        if len(keys) > 1 and diffs[0].shape[0] > 1:
            return x + torch.cat(diffs[::-1]).to(x.device)
        out = x
        for d in diffs:
            out = out + d.to(x.device)
        return out


class EasyCache:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "advanced/debug/model"
    EXPERIMENTAL = True
    DESCRIPTION = (
        "Skips the diffusion model's forward passes whose output is estimated to change little, "
        "reusing each conditioning's last offset of output from input."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return _inputs("EasyCache")

    def patch(
        self, model: Any, reuse_threshold: float, start_percent: float, end_percent: float, verbose: bool
    ) -> tuple[ModelRef]:
        require_model(model)
        ms = model_sampling_from_config(sampling_config(model))
        wrapper = EasyCacheWrapper(
            float(reuse_threshold),
            float(ms.percent_to_sigma(start_percent)),
            float(ms.percent_to_sigma(end_percent)),
            bool(verbose),
        )
        return (with_function(model, DIFFUSION_MODEL, wrapper),)


class LazyCache:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "advanced/debug/model"
    EXPERIMENTAL = True
    DESCRIPTION = (
        "Skips the model on steps whose prediction is estimated to change little, reusing the last "
        "prediction's offset from the input."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return _inputs("LazyCache")

    def patch(
        self, model: Any, reuse_threshold: float, start_percent: float, end_percent: float, verbose: bool
    ) -> tuple[ModelRef]:
        require_model(model)
        ms = model_sampling_from_config(sampling_config(model))
        wrapper = LazyCacheWrapper(
            float(reuse_threshold),
            float(ms.percent_to_sigma(start_percent)),
            float(ms.percent_to_sigma(end_percent)),
            bool(verbose),
        )
        return (with_function(model, PREDICT_NOISE, wrapper),)


NODE_CLASS_MAPPINGS = {"EasyCache": EasyCache, "LazyCache": LazyCache}
NODE_DISPLAY_NAME_MAPPINGS = {"EasyCache": "EasyCache", "LazyCache": "LazyCache"}
