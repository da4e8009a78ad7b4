"""CFG split: a step's two guidance sides evaluated on two executors at once, then combined (issue 41).

When two executors are idle, the sampling loop (nodes.ksampler) sends a step as three `denoise_step` calls: the
positive side's prediction and the negative side's, at the same time, each alone (`cfg_side`), then the step
itself with both predictions given (`prediction.positive`, `prediction.negative`): its guider takes them for the
evaluation they were made for, at (x, sigmas[step]), and the sampler's update follows as in an unsplit step. The
network is batch-invariant (nodes.models.batch_invariant), so a side evaluated alone has the bits it has inside
the unsplit step's batch, and the image is the unsplit run's. A sampler that evaluates the model again within
the step (Heun, the second-order methods) evaluates those itself, on the combining executor; one whose steps do
not begin at (x, sigmas[i]) is not split (UNSPLIT_SAMPLERS).

Only plain guidance is split: one conditioning entry per side, no ControlNets, no model patches or hooks, no
second model, guider or denoise mask, no context windows, and a CFG scale other than 1 (ComfyUI skips the
negative side there). Everything else runs as one call, as before.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from nodes.sampling.samplers import get_sampler

SIDES = ("positive", "negative")
# Samplers whose steps do not begin by evaluating the model at (x, sigmas[i]): dpm_fast and UniPC evaluate at
# points of their own after their first step, dpm_adaptive takes steps off the schedule. A split would be made for
# nothing (tests/nodes/test_cfg_split.py counts, for every other sampler, a given prediction taken at every step).
UNSPLIT_SAMPLERS = frozenset({"dpm_fast", "dpm_adaptive", "uni_pc", "uni_pc_bh2"})
PREDICTION = "prediction"  # a side call's output, and (with the side's name) the combining call's inputs


def given_name(side: str) -> str:
    return f"{PREDICTION}.{side}"


def _single_entry(entries: list[dict[str, Any]]) -> bool:
    """One entry, not a default one, without ControlNets. A side of several entries is evaluated alone in
    another order of its forward passes than beside the other side (the passes group entries of both sides),
    and its accumulated prediction would round differently; one entry's area, mask or sigma range applies
    alike either way."""
    return len(entries) == 1 and not entries[0].get("default") and not entries[0].get("controls")


def splittable(params: Any, inputs: dict[str, Any]) -> bool:
    """Whether a step with these DenoiseParams and inputs may run split (the module's rule). CFG++ samplers step
    along the negative side's prediction, which the combining call does not have alone."""
    return (
        not math.isclose(float(params.cfg), 1.0)
        and not get_sampler(params.sampler).cfg_pp
        and params.sampler not in UNSPLIT_SAMPLERS
        and params.model_patches is None
        and params.middle is None
        and params.dual_cfg is None
        and params.perp_neg is None
        and params.hook_base is None
        and not params.cfg_overrides
        and params.context_windows is None
        and params.uncond_model is None
        and params.latent_shapes is None
        and params.av_cfg is None
        and inputs.get("denoise_mask") is None
        and all(_single_entry(getattr(params, side)) for side in SIDES)
    )


class GivenPredictions:
    """The two sides' predictions for the evaluation at (x, sigma), handed out once: a later evaluation of the
    step (another x or sigma) is the model's own."""

    def __init__(self, x: torch.Tensor, sigma: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> None:
        self._at: tuple[torch.Tensor, torch.Tensor] | None = (x, sigma)
        self._sides = (positive, negative)

    def take(self, x: torch.Tensor, sigma: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        if self._at is None or not (torch.equal(x, self._at[0]) and torch.equal(sigma, self._at[1])):
            return None
        self._at = None
        return self._sides


def step_sigma(x: torch.Tensor, sigmas: torch.Tensor, step: int) -> torch.Tensor:
    """The sigma a sampler's first evaluation of step `step` passes: one per batch item (k-diffusion's
    convention, nodes.sampling.sampler_base.call_model)."""
    return sigmas[step] * x.new_ones([x.shape[0]])
