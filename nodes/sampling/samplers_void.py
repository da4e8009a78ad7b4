"""VOID's DDIM (ComfyUI's VOIDSampler): the scheduler the VOID inpainting models were trained with, stepped in
alpha space (x = sqrt(alpha) * x0 + sqrt(1 - alpha) * eps, alpha = 1 / (1 + sigma^2)). It starts from the noise
itself, unscaled (`starts_from_noise`): the sampling loop neither scales the noise by sigma nor adds the input latent,
and does not undo a scaling at the end."""

from __future__ import annotations

from torch import Tensor

from .model_sampling import ModelSampling
from .noise import NoiseSampler
from .sampler_base import DENOISED, Model, Sampler, call_model


class VoidDDIM(Sampler):
    """One deterministic DDIM step from sigmas[i] to sigmas[i + 1]; the last step to sigma 0 returns the
    prediction."""

    name = "void_ddim"
    starts_from_noise = True

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
        if sigma_next == 0:
            return denoised
        alpha, alpha_next = 1.0 / (1.0 + sigma**2), 1.0 / (1.0 + sigma_next**2)
        eps = (x - alpha**0.5 * denoised) / (1.0 - alpha) ** 0.5
        return alpha_next**0.5 * denoised + (1.0 - alpha_next) ** 0.5 * eps
