"""Samplers that jump through the Markov chain of the forward process: DDPM ancestral steps and LCM.

Both draw fresh Gaussian noise each step from the seeded default noise sampler.
"""
from __future__ import annotations

import torch
from torch import Tensor

from .model_sampling import Eps, ModelSampling
from .noise import NoiseSampler
from .sampler_base import DENOISED, Model, Sampler, call_model


class DDPM(Sampler):
    """Ho et al. 2020's posterior step p(x_{t-1} | x_t), with alpha_bar = 1 / (1 + sigma^2) taken from the
    schedule, done in VP scale (x / sqrt(1 + sigma^2)) and converted back."""

    name = "ddpm"
    noise_kind = "gaussian"

    def step(self, model: Model, x: Tensor, sigmas: Tensor, i: int, state: dict[str, Tensor],
             noise: NoiseSampler, *, model_sampling: ModelSampling | None = None) -> Tensor:
        sigma, sigma_next = sigmas[i], sigmas[i + 1]
        denoised = call_model(model, x, sigma)
        state[DENOISED] = denoised
        x_vp = x / torch.sqrt(1.0 + sigma ** 2.0)
        eps = (x - denoised) / sigma
        ab = 1 / ((sigma * sigma) + 1)
        ab_next = 1 / ((sigma_next * sigma_next) + 1)
        alpha = ab / ab_next
        mu = (1.0 / alpha).sqrt() * (x_vp - (1 - alpha) * eps / (1 - ab).sqrt())
        if sigma_next > 0:
            mu += ((1 - alpha) * (1. - ab_next) / (1. - ab)).sqrt() * noise(sigma, sigma_next)
        if sigma_next != 0:
            mu *= torch.sqrt(1.0 + sigma_next ** 2.0)
        return mu


class LCM(Sampler):
    """Latent consistency sampling: jump to the prediction, then re-noise it to the next sigma."""

    name = "lcm"
    noise_kind = "gaussian"

    def step(self, model: Model, x: Tensor, sigmas: Tensor, i: int, state: dict[str, Tensor],
             noise: NoiseSampler, *, model_sampling: ModelSampling | None = None) -> Tensor:
        sigma, sigma_next = sigmas[i], sigmas[i + 1]
        denoised = call_model(model, x, sigma)
        state[DENOISED] = denoised
        if sigma_next > 0:
            if model_sampling is None:
                return Eps().noise_scaling(sigma_next, noise(sigma, sigma_next), denoised, False)
            return model_sampling.noise_scaling(sigma_next, noise(sigma, sigma_next), denoised)
        return denoised
