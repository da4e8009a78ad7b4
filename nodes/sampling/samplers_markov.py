"""Samplers that jump through the Markov chain of the forward process: DDPM ancestral steps, LCM and LCM with
upscaling.

They draw fresh Gaussian noise each step from the seeded default noise sampler.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from nodes.upscale import common_upscale

from .model_sampling import Eps, ModelSampling
from .noise import GaussianNoise, NoiseSampler
from .sampler_base import DENOISED, Model, Sampler, call_model

ORIGINAL_SIZE, CHANNELS_LAST = "lcm_original_size", "lcm_channels_last"


class DDPM(Sampler):
    """Ho et al. 2020's posterior step p(x_{t-1} | x_t), with alpha_bar = 1 / (1 + sigma^2) taken from the
    schedule, done in VP scale (x / sqrt(1 + sigma^2)) and converted back."""

    name = "ddpm"
    noise_kind = "gaussian"

    def step(
        self,
        model: Model,
        x: Tensor,
        sigmas: Tensor,
        i: int,
        state: dict[str, Tensor],
        noise: NoiseSampler,
        *,
        model_sampling: ModelSampling | None = None,
    ) -> Tensor:
        sigma, sigma_next = sigmas[i], sigmas[i + 1]
        denoised = call_model(model, x, sigma)
        state[DENOISED] = denoised
        x_vp = x / torch.sqrt(1.0 + sigma**2.0)
        eps = (x - denoised) / sigma
        ab = 1 / ((sigma * sigma) + 1)
        ab_next = 1 / ((sigma_next * sigma_next) + 1)
        alpha = ab / ab_next
        mu = (1.0 / alpha).sqrt() * (x_vp - (1 - alpha) * eps / (1 - ab).sqrt())
        if sigma_next > 0:
            mu += ((1 - alpha) * (1.0 - ab_next) / (1.0 - ab)).sqrt() * noise(sigma, sigma_next)
        if sigma_next != 0:
            mu *= torch.sqrt(1.0 + sigma_next**2.0)
        return mu


class LCM(Sampler):
    """Latent consistency sampling: jump to the prediction, then re-noise it to the next sigma.

    Today's ComfyUI (SamplerLCM) scales each step's noise by s_noise at the first step moving linearly to
    s_noise_end at the last, and may clamp it to noise_clip_std of its own standard deviation first; the
    defaults (1, same, 0) are the plain sampler KSampler's "lcm" runs."""

    name = "lcm"
    noise_kind = "gaussian"

    def __init__(self, s_noise: float = 1.0, s_noise_end: float | None = None, noise_clip_std: float = 0.0) -> None:
        self.s_noise, self.s_noise_end, self.noise_clip_std = s_noise, s_noise_end, noise_clip_std

    def _step_noise(self, draw: Tensor, i: int, sigmas: Tensor) -> Tensor:
        if self.noise_clip_std > 0:
            bound = self.noise_clip_std * draw.std()
            draw = draw.clamp(min=-bound, max=bound)
        n_steps = max(1, len(sigmas) - 1)
        t = i / (n_steps - 1) if n_steps > 1 else 0.0
        end = self.s_noise if self.s_noise_end is None else self.s_noise_end
        return draw * (self.s_noise + (end - self.s_noise) * t)

    def step(
        self,
        model: Model,
        x: Tensor,
        sigmas: Tensor,
        i: int,
        state: dict[str, Tensor],
        noise: NoiseSampler,
        *,
        model_sampling: ModelSampling | None = None,
    ) -> Tensor:
        sigma, sigma_next = sigmas[i], sigmas[i + 1]
        denoised = call_model(model, x, sigma)
        state[DENOISED] = denoised
        if sigma_next > 0:
            draw = self._step_noise(noise(sigma, sigma_next), i, sigmas)
            if model_sampling is None:
                return Eps().noise_scaling(sigma_next, draw, denoised, False)
            return model_sampling.noise_scaling(sigma_next, draw, denoised)
        return denoised


class LCMUpscale(Sampler):
    """LCM that also enlarges the latent over its first steps (SamplerLCMUpscale): after each of the first
    `upscale_steps` steps the prediction is resized towards total_upscale times the starting size, then
    re-noised. The starting size is kept in the state; the re-noising draws from the seeded stream in the new
    shape (ComfyUI draws from torch's unseeded global generator, the same stream when it is seeded alike)."""

    name = "lcm_upscale"
    noise_kind = "gaussian"

    def __init__(
        self, total_upscale: float = 2.0, upscale_method: str = "bislerp", upscale_steps: int | None = None
    ) -> None:
        self.total_upscale, self.upscale_method, self.upscale_steps = total_upscale, upscale_method, upscale_steps

    def make_noise(self, seed: int, x: Tensor, sigmas: Tensor, state: dict[str, Tensor]) -> NoiseSampler:
        # ComfyUI's sample_lcm_upscale uses no default_noise_sampler (whose CPU stream takes seed + 1): its
        # global generator is the one seeded with the seed itself
        return GaussianNoise.from_state(seed, x, state, cpu_offset=0)

    def step(
        self,
        model: Model,
        x: Tensor,
        sigmas: Tensor,
        i: int,
        state: dict[str, Tensor],
        noise: NoiseSampler,
        *,
        model_sampling: ModelSampling | None = None,
    ) -> Tensor:
        if self.upscale_steps is None:
            count = max(len(sigmas) // 2 + 1, 2)
        else:
            count = min(self.upscale_steps + 1, len(sigmas) + 1)
        scales = np.linspace(1.0, self.total_upscale, count)[1:]
        if ORIGINAL_SIZE not in state:
            state[ORIGINAL_SIZE] = torch.tensor(x.shape[-2:])
        height, width = (int(v) for v in state[ORIGINAL_SIZE])
        x = call_model(model, x, sigmas[i])
        state[DENOISED] = x
        if i < len(scales):
            x = common_upscale(x, round(width * scales[i]), round(height * scales[i]), self.upscale_method, "disabled")
            if self.upscale_method == "bislerp":
                state[CHANNELS_LAST] = torch.tensor(True)
        if sigmas[i + 1] > 0:
            assert isinstance(noise, GaussianNoise)
            # The re-noising fills x in memory order (torch.randn_like). ComfyUI's bislerp returns channels-last
            # memory, which the following steps keep (the model's output follows its input's layout); here a
            # step's x leaves it in the standard layout, so the draw takes the layout ComfyUI's x would have.
            layout = x.contiguous(memory_format=torch.channels_last) if CHANNELS_LAST in state else x
            x = x + sigmas[i + 1] * noise.like(layout)
        return x.contiguous()
