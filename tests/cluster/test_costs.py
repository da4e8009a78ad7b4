"""Execution-time estimates learned from measurements."""

from __future__ import annotations

import torch

from cluster.scheduling.costs import DEFAULT_ESTIMATE_S, CostModel, remaining_critical_path, shape_signature
from nodes.modelfns.denoise import DenoiseParams


def test_estimates_follow_measurements_and_fall_back_to_relatives():
    costs = CostModel(alpha=0.5)
    small = shape_signature({"x": torch.zeros(1, 4, 8, 8)})
    big = shape_signature({"x": torch.zeros(1, 4, 64, 64)})
    assert costs.estimate("denoise_step", "m", small) == DEFAULT_ESTIMATE_S
    costs.observe("denoise_step", "m", small, 0.2)
    assert costs.estimate("denoise_step", "m", small) == 0.2
    costs.observe("denoise_step", "m", small, 0.4)
    assert costs.estimate("denoise_step", "m", small) == 0.30000000000000004
    costs.observe("denoise_step", "m", big, 2.0)
    assert costs.estimate("denoise_step", "m", big) == 2.0
    assert costs.estimate("denoise_step", "m", small) == 0.30000000000000004  # shapes kept apart
    unseen = shape_signature({"x": torch.zeros(2, 4, 8, 8)})
    assert 0.3 < costs.estimate("denoise_step", "m", unseen) < 2.0  # (fn, model) average
    assert costs.estimate("denoise_step", "other-model") > 0.3  # fn average
    assert costs.samples("denoise_step", "m", small) == 2


def test_remaining_critical_path_counts_denoising_steps_left():
    costs = CostModel()
    costs.observe("denoise_step", "m", (), 0.5)
    costs.observe("vae_decode", "v", (), 0.25)
    sigmas = torch.linspace(1, 0, 21)  # 20 steps
    step = DenoiseParams(sampler="euler", seed=0, cfg=1.0, model_sampling={})
    first = remaining_critical_path("denoise_step", {"sigmas": sigmas}, step, costs, "m", ())
    last = remaining_critical_path("denoise_step", {"sigmas": sigmas}, step.replace(step=19), costs, "m", ())
    assert first == 19 * 0.5 + 0.25 and last == 0.25
    assert remaining_critical_path("vae_decode", {}, {}, costs, "v", ()) == 0.0
