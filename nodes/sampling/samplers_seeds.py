"""Stochastic exponential-integrator samplers in data prediction: ER-SDE (Cui et al. 2023, arXiv 2309.06169)
and SEEDS-2 / SEEDS-3 (Gonzalez et al. 2023, arXiv 2305.14267), in k-diffusion's formulations. They work in
the half log-SNR lambda, so rectified-flow models (CONST) use their own lambda and start just below sigma 1.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .model_sampling import ModelSampling
from .noise import NoiseSampler
from .sampler_base import (
    DENOISED,
    Model,
    Sampler,
    call_model,
    half_log_snr,
    offset_first_sigma,
    sigma_from_half_log_snr,
)

_INTEGRATION_POINTS = 200.0


def _phi_1(h: Tensor) -> Tensor:
    """h * phi_1(h) of exponential integrators."""
    return torch.expm1(h)


def _phi_2(h: Tensor) -> Tensor:
    """h * phi_2(h)."""
    return (torch.expm1(h) - h) / h


class ERSDE(Sampler):
    """ER-SDE-Solver-3 (VP): up to three stages using the previous predictions, with a noise scaler
    function of lambda. `scaler_eta` None is ER-SDE's own scaler x (e^(x^0.3) + 10); a number e gives the
    reverse-time SDE's x^(e + 1) (SamplerER_SDE's other solver types)."""

    name = "er_sde"
    noise_kind = "gaussian"

    def __init__(self, s_noise: float = 1.0, max_stage: int = 3, scaler_eta: float | None = None) -> None:
        self.s_noise, self.max_stage, self.scaler_eta = s_noise, max_stage, scaler_eta

    def _scale(self, v: Tensor) -> Tensor:
        if self.scaler_eta is None:
            return v * ((v**0.3).exp() + 10.0)
        return v ** (self.scaler_eta + 1)

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
        sigmas = offset_first_sigma(sigmas, model_sampling)
        # Over the whole schedule at once, as ComfyUI computes them (elementwise results then agree bit for bit).
        lambdas = half_log_snr(sigmas, model_sampling).neg().exp()
        denoised = call_model(model, x, sigmas[i])
        old_denoised, old_denoised_d = state.get(DENOISED), state.get("old_denoised_d")
        state[DENOISED] = denoised
        stage = min(self.max_stage, i + 1)
        if sigmas[i + 1] == 0:
            return denoised
        lam_s, lam_t = lambdas[i], lambdas[i + 1]
        alpha_s, alpha_t = sigmas[i] / lam_s, sigmas[i + 1] / lam_t
        r = self._scale(lam_t) / self._scale(lam_s)
        x = alpha_t / alpha_s * r * x + alpha_t * (1 - r) * denoised
        if stage >= 2:
            dt = lam_t - lam_s
            step_size = -dt / _INTEGRATION_POINTS
            points = torch.arange(0, _INTEGRATION_POINTS, dtype=torch.float32, device=x.device)
            positions = lam_t + points * step_size
            scaled = self._scale(positions)
            s = torch.sum(1 / scaled) * step_size
            denoised_d = (denoised - old_denoised) / (lam_s - lambdas[i - 1])
            x = x + alpha_t * (dt + s * self._scale(lam_t)) * denoised_d
            if stage >= 3:
                s_u = torch.sum((positions - lam_s) / scaled) * step_size
                denoised_u = (denoised_d - old_denoised_d) / ((lam_s - lambdas[i - 2]) / 2)
                x = x + alpha_t * ((dt**2) / 2 + s_u * self._scale(lam_t)) * denoised_u
            state["old_denoised_d"] = denoised_d
        if self.s_noise > 0:
            spread = (lam_t**2 - lam_s**2 * r**2).sqrt().nan_to_num(nan=0.0)
            x = x + alpha_t * noise(sigmas[i], sigmas[i + 1]) * self.s_noise * spread
        return x


class SEEDS(Sampler):
    """SEEDS with 2 stages (intermediate point at r) or 3 stages (at r_1 = 1/3, r_2 = 2/3); the noise of the
    sub-steps is correlated within a step (one Brownian path decayed between the stages)."""

    noise_kind = "gaussian"

    def __init__(self, stages: int, eta: float = 1.0, s_noise: float = 1.0) -> None:
        self.stages, self.eta, self.s_noise = stages, eta, s_noise
        self.name = f"seeds_{stages}"
        # SEEDS-2 only (ComfyUI's SamplerSEEDS2): where the intermediate point lies, and whether the last stage
        # combines the two predictions linearly ("phi_1") or with the second-order phi_2 weights ("phi_2")
        self.r, self.phi = 0.5, "phi_1"

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
        ms = model_sampling
        sigmas = offset_first_sigma(sigmas, ms)
        sigma, sigma_next = sigmas[i], sigmas[i + 1]
        denoised = call_model(model, x, sigma)
        state[DENOISED] = denoised
        if sigma_next == 0:
            return denoised
        eta, inject = self.eta, self.eta > 0 and self.s_noise > 0
        lam_s, lam_t = half_log_snr(sigma, ms), half_log_snr(sigma_next, ms)
        h = lam_t - lam_s
        h_eta = h * (eta + 1)
        alpha_t = sigma_next * lam_t.exp()
        r_1 = self.r if self.stages == 2 else 1.0 / 3
        lam_1 = torch.lerp(lam_s, lam_t, r_1)
        sigma_1 = sigma_from_half_log_snr(lam_1, ms)
        alpha_1 = sigma_1 * lam_1.exp()
        x_2 = sigma_1 / sigma * (-r_1 * h * eta).exp() * x - alpha_1 * _phi_1(-r_1 * h_eta) * denoised
        sde_noise = None
        if inject:
            sde_noise = (-2 * r_1 * h * eta).expm1().neg().sqrt() * noise(sigma, sigma_1)
            x_2 = x_2 + sde_noise * sigma_1 * self.s_noise
        denoised_2 = call_model(model, x_2, sigma_1)
        if self.stages == 2:
            if self.phi == "phi_2":
                b2 = _phi_2(-h_eta) / r_1
                x = sigma_next / sigma * (-h * eta).exp() * x - alpha_t * (
                    (_phi_1(-h_eta) - b2) * denoised + b2 * denoised_2
                )
            else:
                denoised_d = torch.lerp(denoised, denoised_2, 1 / (2 * r_1))
                x = sigma_next / sigma * (-h * eta).exp() * x - alpha_t * _phi_1(-h_eta) * denoised_d
            last_sigma, last_r = sigma_1, r_1
        else:
            r_2 = 2.0 / 3
            lam_2 = torch.lerp(lam_s, lam_t, r_2)
            sigma_2 = sigma_from_half_log_snr(lam_2, ms)
            alpha_2 = sigma_2 * lam_2.exp()
            a3_2 = r_2 / r_1 * _phi_2(-r_2 * h_eta)
            a3_1 = _phi_1(-r_2 * h_eta) - a3_2
            x_3 = sigma_2 / sigma * (-r_2 * h * eta).exp() * x - alpha_2 * (a3_1 * denoised + a3_2 * denoised_2)
            if inject:
                sde_noise = self._carry(sde_noise, (r_1 - r_2) * h * eta, noise(sigma_1, sigma_2))
                x_3 = x_3 + sde_noise * sigma_2 * self.s_noise
            denoised_3 = call_model(model, x_3, sigma_2)
            b3 = _phi_2(-h_eta) / r_2
            b1 = _phi_1(-h_eta) - b3
            x = sigma_next / sigma * (-h * eta).exp() * x - alpha_t * (b1 * denoised + b3 * denoised_3)
            last_sigma, last_r = sigma_2, r_2
        if inject:
            sde_noise = self._carry(sde_noise, (last_r - 1) * h * eta, noise(last_sigma, sigma_next))
            x = x + sde_noise * sigma_next * self.s_noise
        return x

    @staticmethod
    def _carry(sde_noise: Tensor, segment: Tensor, fresh: Tensor) -> Tensor:
        """The previous sub-step's noise decayed over the segment, plus fresh noise of the missing variance."""
        return sde_noise * segment.exp() + segment.mul(2).expm1().neg().sqrt() * fresh
