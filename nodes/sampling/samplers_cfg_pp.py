"""The CFG++ samplers (Chung et al. 2024, arXiv 2406.08070) in k-diffusion's formulations: each step moves
along the negative side's prediction (renoising with it) instead of the guided one, which keeps the sample on
the data manifold at small guidance scales. The denoiser hands the negative prediction over
(sampler_base.call_model_cfg_pp) and evaluates it even at cfg 1, as ComfyUI does.
"""

from __future__ import annotations

from torch import Tensor

from .model_sampling import ModelSampling
from .noise import NoiseSampler
from .sampler_base import DENOISED, Model, Sampler, ancestral_step, call_model_cfg_pp, half_log_snr, to_d
from .samplers_dpmpp import _sigma, _t

OLD_UNCOND = "old_uncond"


class EulerAncestralCFGPP(Sampler):
    """Euler CFG++ with DDIM-style ancestral noise (eta = 0: euler_cfg_pp, deterministic)."""

    name = "euler_ancestral_cfg_pp"
    cfg_pp = True

    def __init__(self, eta: float = 1.0, s_noise: float = 1.0, name: str | None = None) -> None:
        self.eta, self.s_noise = eta, s_noise
        self.name = name or self.name

    @property
    def noise_kind(self) -> str:  # type: ignore[override]
        return "gaussian" if self.eta > 0 and self.s_noise > 0 else "none"

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
        denoised, uncond = call_model_cfg_pp(model, x, sigma)
        state[DENOISED] = denoised
        if sigma_next == 0:
            return denoised
        alpha_s = sigma * half_log_snr(sigma, model_sampling).exp()
        alpha_t = sigma_next * half_log_snr(sigma_next, model_sampling).exp()
        d = to_d(x, sigma, alpha_s * uncond)
        sigma_down, sigma_up = ancestral_step(sigma / alpha_s, sigma_next / alpha_t, eta=self.eta)
        x = alpha_t * denoised + alpha_t * sigma_down * d
        if self.eta > 0 and self.s_noise > 0:
            x = x + alpha_t * noise(sigma, sigma_next) * self.s_noise * sigma_up
        return x


class DPMPP2SAncestralCFGPP(Sampler):
    """DPM-Solver++(2S) ancestral, CFG++: the midpoint and the step start from x shifted by the guidance."""

    name = "dpmpp_2s_ancestral_cfg_pp"
    noise_kind = "gaussian"
    cfg_pp = True

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
        sigma, sigma_next = sigmas[i], sigmas[i + 1]
        denoised, uncond = call_model_cfg_pp(model, x, sigma)
        state[DENOISED] = denoised
        sigma_down, sigma_up = ancestral_step(sigma, sigma_next, self.eta)
        if sigma_down == 0:
            x = denoised + to_d(x, sigma, uncond) * sigma_down
        else:
            t, t_next = _t(sigma), _t(sigma_down)
            h = t_next - t
            s = t + 0.5 * h
            x_2 = (_sigma(s) / _sigma(t)) * (x + (denoised - uncond)) - (-h * 0.5).expm1() * denoised
            # As ComfyUI's: the final update shifts x by the first prediction minus the midpoint's negative one.
            denoised_2, uncond = call_model_cfg_pp(model, x_2, _sigma(s))
            x = (_sigma(t_next) / _sigma(t)) * (x + (denoised - uncond)) - (-h).expm1() * denoised_2
        if sigma_next > 0:
            x = x + noise(sigma, sigma_next) * self.s_noise * sigma_up
        return x


class DPMPP2MCFGPP(Sampler):
    """DPM-Solver++(2M), CFG++: the exponential step renoises with the negative prediction."""

    name = "dpmpp_2m_cfg_pp"
    cfg_pp = True

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
        old_uncond = state.get(OLD_UNCOND)
        denoised, uncond = call_model_cfg_pp(model, x, sigma)
        state[DENOISED], state[OLD_UNCOND] = denoised, uncond
        t, t_next = _t(sigma), _t(sigma_next)
        h = t_next - t
        if old_uncond is None or sigma_next == 0:
            mix = -(-h).exp() * uncond
        else:
            r = (t - _t(sigmas[i - 1])) / h
            mix = -(-h).exp() * uncond - (-h).expm1() * (1 / (2 * r)) * (denoised - old_uncond)
        return denoised + mix + (-h).exp() * x


class RESMultistepCFGPP(Sampler):
    """RES multistep, CFG++ (eta > 0: the ancestral variant)."""

    name = "res_multistep_cfg_pp"
    cfg_pp = True

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
        old_uncond, old_sigma_down = state.get(OLD_UNCOND), state.get("old_sigma_down")
        denoised, uncond = call_model_cfg_pp(model, x, sigma)
        sigma_down, sigma_up = ancestral_step(sigma, sigma_next, eta=self.eta)
        if sigma_down == 0 or old_uncond is None:
            x = denoised + to_d(x, sigma, uncond) * sigma_down
        else:
            t, t_old, t_next, t_prev = _t(sigma), _t(old_sigma_down), _t(sigma_down), _t(sigmas[i - 1])
            h = t_next - t
            c2 = (t_prev - t_old) / h
            phi1 = (-h).expm1() / (-h)
            phi2 = (phi1 - 1.0) / (-h)
            b1 = (phi1 - phi2 / c2).nan_to_num(nan=0.0)
            b2 = (phi2 / c2).nan_to_num(nan=0.0)
            x = x + (denoised - uncond)
            x = _sigma(h) * x + h * (b1 * uncond + b2 * old_uncond)
        if sigma_next > 0 and self.eta:  # eta 0: sigma_up is 0, ComfyUI's draw is multiplied away
            x = x + noise(sigma, sigma_next) * self.s_noise * sigma_up
        state[DENOISED], state[OLD_UNCOND] = denoised, uncond
        state["old_sigma_down"] = sigma_down
        return x


class GradientEstimationCFGPP(Sampler):
    """Gradient estimation with the CFG++ Euler step (the gradient from the negative prediction)."""

    name = "gradient_estimation_cfg_pp"
    cfg_pp = True

    def __init__(self, ge_gamma: float = 2.0) -> None:
        self.ge_gamma = ge_gamma

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
        denoised, uncond = call_model_cfg_pp(model, x, sigmas[i])
        state[DENOISED] = denoised
        d = to_d(x, sigmas[i], uncond)
        old_d = state.get("old_d")
        state["old_d"] = d
        dt = sigmas[i + 1] - sigmas[i]
        if sigmas[i + 1] == 0:
            return denoised
        x = denoised + d * sigmas[i + 1]
        if i >= 1 and old_d is not None:
            x = x + (self.ge_gamma - 1) * (d - old_d) * dt
        return x


class EulerCFGPPAlternative(Sampler):
    """SamplerEulerCFG++'s "alternative" version: Euler along the derivative of the guided prediction
    evaluated at x shifted by the negative minus the guided prediction."""

    name = "euler_cfg_pp_alternative"
    cfg_pp = True

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
        denoised, uncond = call_model_cfg_pp(model, x, sigmas[i])
        state[DENOISED] = denoised
        d = to_d(x - denoised + uncond, sigmas[i], denoised)
        return x + d * (sigmas[i + 1] - sigmas[i])
