"""The non-node names of comfy_extras.nodes_model_advanced: LCM (the latent consistency parameterisation) and
ModelSamplingDiscreteDistilled (LCM's 50-step subset of the DDPM table), which packs combine into their own
sampling classes as ComfyUI's ModelSamplingDiscrete node does. The maths is ours
(nodes.sampling.model_sampling.Lcm / DistilledDiscreteSampling)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from comfy_bridge.compat.comfy import model_sampling
from nodes.sampling import model_sampling as ours


class LCM(model_sampling.EPS):
    """eps prediction blended with the input by LCM's boundary-condition coefficients (needs self.timestep)."""

    def calculate_denoised(self, sigma: Tensor, model_output: Tensor, model_input: Tensor) -> Tensor:
        return ours.Lcm(self.timestep).calculate_denoised(sigma, model_output, model_input, 0.5)


class ModelSamplingDiscreteDistilled(model_sampling.ModelSamplingDiscrete):
    """Every (num_timesteps / original_timesteps)-th sigma of the DDPM table; timesteps map back onto it."""

    original_timesteps = 50

    def __init__(self, model_config: Any = None, zsnr: bool | None = None) -> None:
        super().__init__(model_config, zsnr=zsnr)
        self.skip_steps = self.num_timesteps // self.original_timesteps
        n, full = self.original_timesteps, self.sigmas
        subset = torch.zeros(n, dtype=torch.float32)
        for k in range(n):
            subset[n - 1 - k] = full[self.num_timesteps - 1 - k * self.skip_steps]
        self.set_sigmas(subset)

    timestep = ours.DistilledDiscreteSampling.timestep
    sigma = ours.DistilledDiscreteSampling.sigma


__all__ = ["LCM", "ModelSamplingDiscreteDistilled"]
