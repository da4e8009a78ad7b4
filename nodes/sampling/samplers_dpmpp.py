"""DPM-Solver++ family (Lu et al. 2022, arXiv 2211.01095) and RES multistep, in k-diffusion's formulations.

They integrate in lambda = log(alpha / sigma) (half log-SNR) with exponential-integrator weights. For
rectified-flow models (CONST parameterisation) lambda is log((1 - sigma) / sigma) and alpha = 1 - sigma.
"""

from __future__ import annotations

from torch import Tensor

from .model_sampling import ModelSampling
from .noise import NoiseSampler
from .sampler_base import (
    DENOISED,
    Model,
    Sampler,
    ancestral_step,
    call_model,
    flow_ancestral_step,
    half_log_snr,
    is_const,
    offset_first_sigma,
    push_history,
    sigma_from_half_log_snr,
    to_d,
)


def _t(sigma: Tensor) -> Tensor:
    return sigma.log().neg()


def _sigma(t: Tensor) -> Tensor:
    return t.neg().exp()


class DPMPP2SAncestral(Sampler):
    """DPM-Solver++(2S): a midpoint model call in lambda, then ancestral noise."""

    name = "dpmpp_2s_ancestral"
    noise_kind = "gaussian"

    def __init__(self, eta: float = 1.0, s_noise: float = 1.0) -> None:
        self.eta, self.s_noise = eta, s_noise

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
        if is_const(model_sampling):
            return self._flow_step(model, x, sigmas, i, state, noise)
        sigma, sigma_next = sigmas[i], sigmas[i + 1]
        denoised = call_model(model, x, sigma)
        state[DENOISED] = denoised
        sigma_down, sigma_up = ancestral_step(sigma, sigma_next, self.eta)
        if sigma_down == 0:
            x = x + to_d(x, sigma, denoised) * (sigma_down - sigma)
        else:
            t, t_next = _t(sigma), _t(sigma_down)
            h = t_next - t
            s = t + 0.5 * h
            x_2 = (_sigma(s) / _sigma(t)) * x - (-h * 0.5).expm1() * denoised
            denoised_2 = call_model(model, x_2, _sigma(s))
            x = (_sigma(t_next) / _sigma(t)) * x - (-h).expm1() * denoised_2
        if sigma_next > 0:
            x = x + noise(sigma, sigma_next) * self.s_noise * sigma_up
        return x

    def _flow_step(
        self, model: Model, x: Tensor, sigmas: Tensor, i: int, state: dict[str, Tensor], noise: NoiseSampler
    ) -> Tensor:
        sigma, sigma_next = sigmas[i], sigmas[i + 1]
        denoised = call_model(model, x, sigma)
        state[DENOISED] = denoised
        sigma_down, alpha_ratio, renoise = flow_ancestral_step(sigma, sigma_next, self.eta)
        if sigma_next == 0:
            x = x + to_d(x, sigma, denoised) * (sigma_down - sigma)
        else:
            if sigma == 1.0:
                sigma_s = 0.9999  # lambda(1) is -inf: take the midpoint just below it
            else:
                lam, lam_down = ((1 - sigma) / sigma).log(), ((1 - sigma_down) / sigma_down).log()
                sigma_s = ((lam + 0.5 * (lam_down - lam)).exp() + 1) ** -1
            ratio_s = sigma_s / sigma
            denoised_2 = call_model(model, ratio_s * x + (1 - ratio_s) * denoised, sigma_s)
            ratio_down = sigma_down / sigma
            x = ratio_down * x + (1 - ratio_down) * denoised_2
        if sigma_next > 0 and self.eta > 0:
            x = alpha_ratio * x + noise(sigma, sigma_next) * self.s_noise * renoise
        return x


class DPMPPSDE(Sampler):
    """DPM-Solver++ (stochastic, singlestep, r = 1/2) with Brownian-tree noise."""

    name = "dpmpp_sde"
    noise_kind = "brownian"

    def __init__(
        self,
        eta: float = 1.0,
        s_noise: float = 1.0,
        r: float = 0.5,
        name: str | None = None,
        noise_kind: str | None = None,
    ) -> None:
        self.eta, self.s_noise, self.r = eta, s_noise, r
        self.name = name or self.name
        self.noise_kind = noise_kind or self.noise_kind

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
        lam_s, lam_t = half_log_snr(sigma, ms), half_log_snr(sigma_next, ms)
        h = lam_t - lam_s
        lam_s1 = lam_s + self.r * h
        fac = 1 / (2 * self.r)
        sigma_s1 = sigma_from_half_log_snr(lam_s1, ms)
        alpha_s = sigma * lam_s.exp()
        alpha_s1 = sigma_s1 * lam_s1.exp()
        alpha_t = sigma_next * lam_t.exp()
        noisy = self.eta > 0 and self.s_noise > 0

        # Stage 1: to lambda_s1 (ancestral split of that sub-step).
        sd, su = ancestral_step(lam_s.neg().exp(), lam_s1.neg().exp(), self.eta)
        h_ = sd.log().neg() - lam_s
        x_2 = (alpha_s1 / alpha_s) * (-h_).exp() * x - alpha_s1 * (-h_).expm1() * denoised
        if noisy:
            x_2 = x_2 + alpha_s1 * noise(sigma, sigma_s1) * self.s_noise * su
        denoised_2 = call_model(model, x_2, sigma_s1)

        # Stage 2: the full step with the blended prediction.
        sd, su = ancestral_step(lam_s.neg().exp(), lam_t.neg().exp(), self.eta)
        h_ = sd.log().neg() - lam_s
        denoised_d = (1 - fac) * denoised + fac * denoised_2
        x = (alpha_t / alpha_s) * (-h_).exp() * x - alpha_t * (-h_).expm1() * denoised_d
        if noisy:
            x = x + alpha_t * noise(sigma, sigma_next) * self.s_noise * su
        return x


class DPMPP2M(Sampler):
    """DPM-Solver++(2M): second-order multistep using the previous step's prediction."""

    name = "dpmpp_2m"

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
        old_denoised = state.get(DENOISED)
        denoised = call_model(model, x, sigma)
        state[DENOISED] = denoised
        t, t_next = _t(sigma), _t(sigma_next)
        h = t_next - t
        if old_denoised is None or sigma_next == 0:
            return (_sigma(t_next) / _sigma(t)) * x - (-h).expm1() * denoised
        r = (t - _t(sigmas[i - 1])) / h
        denoised_d = (1 + 1 / (2 * r)) * denoised - (1 / (2 * r)) * old_denoised
        return (_sigma(t_next) / _sigma(t)) * x - (-h).expm1() * denoised_d


class DPMPP2MSDE(Sampler):
    """DPM-Solver++(2M) SDE with Brownian-tree noise; solver_type 'midpoint' (ComfyUI default) or 'heun'."""

    name = "dpmpp_2m_sde"
    noise_kind = "brownian"

    def __init__(
        self,
        eta: float = 1.0,
        s_noise: float = 1.0,
        solver_type: str = "midpoint",
        name: str | None = None,
        noise_kind: str | None = None,
    ) -> None:
        if solver_type not in ("heun", "midpoint"):
            raise ValueError("solver_type must be 'heun' or 'midpoint'")
        self.eta, self.s_noise, self.solver_type = eta, s_noise, solver_type
        self.name = name or self.name
        self.noise_kind = noise_kind or self.noise_kind

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
        sigma, sigma_next = sigmas[i], sigmas[i + 1]
        old_denoised = state.get(DENOISED)
        denoised = call_model(model, x, sigma)
        state[DENOISED] = denoised
        if sigma_next == 0:
            return denoised
        lam_s, lam_t = half_log_snr(sigma, model_sampling), half_log_snr(sigma_next, model_sampling)
        h = lam_t - lam_s
        h_eta = h * (self.eta + 1)
        alpha_t = sigma_next * lam_t.exp()
        x = sigma_next / sigma * (-h * self.eta).exp() * x + alpha_t * (-h_eta).expm1().neg() * denoised
        if old_denoised is not None:
            r = state["h_last"] / h
            if self.solver_type == "heun":
                x = x + alpha_t * ((-h_eta).expm1().neg() / (-h_eta) + 1) * (1 / r) * (denoised - old_denoised)
            else:
                x = x + 0.5 * alpha_t * (-h_eta).expm1().neg() * (1 / r) * (denoised - old_denoised)
        if self.eta > 0 and self.s_noise > 0:
            x = x + noise(sigma, sigma_next) * sigma_next * (-2 * h * self.eta).expm1().neg().sqrt() * self.s_noise
        state["h_last"] = h
        return x


class DPMPP3MSDE(Sampler):
    """DPM-Solver++(3M) SDE: third-order multistep from the last two predictions, Brownian-tree noise."""

    name = "dpmpp_3m_sde"
    noise_kind = "brownian"

    def __init__(
        self, eta: float = 1.0, s_noise: float = 1.0, name: str | None = None, noise_kind: str | None = None
    ) -> None:
        self.eta, self.s_noise = eta, s_noise
        self.name = name or self.name
        self.noise_kind = noise_kind or self.noise_kind

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
        sigma, sigma_next = sigmas[i], sigmas[i + 1]
        denoised_1, denoised_2 = state.get(DENOISED), state.get("denoised_2")
        h_1, h_2 = state.get("h_1"), state.get("h_2")
        denoised = call_model(model, x, sigma)
        h = h_1  # a final step to sigma = 0 keeps the last step size in the history
        if sigma_next == 0:
            x = denoised
        else:
            lam_s, lam_t = half_log_snr(sigma, model_sampling), half_log_snr(sigma_next, model_sampling)
            h = lam_t - lam_s
            h_eta = h * (self.eta + 1)
            alpha_t = sigma_next * lam_t.exp()
            x = sigma_next / sigma * (-h * self.eta).exp() * x + alpha_t * (-h_eta).expm1().neg() * denoised
            if h_2 is not None:
                r0, r1 = h_1 / h, h_2 / h
                d1_0 = (denoised - denoised_1) / r0
                d1_1 = (denoised_1 - denoised_2) / r1
                d1 = d1_0 + (d1_0 - d1_1) * r0 / (r0 + r1)
                d2 = (d1_0 - d1_1) / (r0 + r1)
                phi_2 = h_eta.neg().expm1() / h_eta + 1
                phi_3 = phi_2 / h_eta - 0.5
                x = x + (alpha_t * phi_2) * d1 - (alpha_t * phi_3) * d2
            elif h_1 is not None:
                d = (denoised - denoised_1) / (h_1 / h)
                phi_2 = h_eta.neg().expm1() / h_eta + 1
                x = x + (alpha_t * phi_2) * d
            if self.eta > 0 and self.s_noise > 0:
                x = x + noise(sigma, sigma_next) * sigma_next * (-2 * h * self.eta).expm1().neg().sqrt() * self.s_noise
        push_history(state, [DENOISED, "denoised_2"], denoised)
        push_history(state, ["h_1", "h_2"], h)
        return x


class RESMultistep(Sampler):
    """RES second-order multistep (Zhang et al. 2023, arXiv 2308.02157); eta > 0 makes it ancestral."""

    name = "res_multistep"

    def __init__(self, eta: float = 0.0, s_noise: float = 1.0, name: str | None = None) -> None:
        self.eta, self.s_noise = eta, s_noise
        self.name = name or self.name
        self.noise_kind = "gaussian" if eta else "none"

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
        old_denoised, old_sigma_down = state.get(DENOISED), state.get("old_sigma_down")
        denoised = call_model(model, x, sigma)
        sigma_down, sigma_up = ancestral_step(sigma, sigma_next, eta=self.eta)
        if sigma_down == 0 or old_denoised is None:
            x = x + to_d(x, sigma, denoised) * (sigma_down - sigma)
        else:
            t, t_old, t_next, t_prev = _t(sigma), _t(old_sigma_down), _t(sigma_down), _t(sigmas[i - 1])
            h = t_next - t
            c2 = (t_prev - t_old) / h
            phi1 = (-h).expm1() / (-h)
            phi2 = (phi1 - 1.0) / (-h)
            b1 = (phi1 - phi2 / c2).nan_to_num(nan=0.0)
            b2 = (phi2 / c2).nan_to_num(nan=0.0)
            x = _sigma(h) * x + h * (b1 * denoised + b2 * old_denoised)
        # With eta = 0 sigma_up is 0 and the noise would be multiplied away: skip the draw.
        if sigma_next > 0 and self.eta:
            x = x + noise(sigma, sigma_next) * self.s_noise * sigma_up
        state[DENOISED] = denoised
        state["old_sigma_down"] = sigma_down
        return x
