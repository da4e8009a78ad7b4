"""Samplers that integrate the probability-flow ODE dx/dsigma = (x - D(x, sigma)) / sigma directly in sigma
(Karras et al. 2022 and k-diffusion's formulations), plus their ancestral variants.
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
    is_const,
    stack_history,
    to_d,
)


class Euler(Sampler):
    """Explicit Euler in sigma (first order). ComfyUI's ddim is this same sampler."""

    name = "euler"

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
        denoised = call_model(model, x, sigmas[i])
        state[DENOISED] = denoised
        d = to_d(x, sigmas[i], denoised)
        return x + d * (sigmas[i + 1] - sigmas[i])


class EulerAncestral(Sampler):
    """Euler down to sigma_down, then add fresh noise of sigma_up (eta scales the noise)."""

    name = "euler_ancestral"
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
        sigma, sigma_next = sigmas[i], sigmas[i + 1]
        denoised = call_model(model, x, sigma)
        state[DENOISED] = denoised
        if is_const(model_sampling):
            if sigma_next == 0:
                return denoised
            sigma_down, alpha_ratio, renoise = flow_ancestral_step(sigma, sigma_next, self.eta)
            ratio = sigma_down / sigma
            x = ratio * x + (1 - ratio) * denoised
            if self.eta > 0:
                x = alpha_ratio * x + noise(sigma, sigma_next) * self.s_noise * renoise
            return x
        sigma_down, sigma_up = ancestral_step(sigma, sigma_next, self.eta)
        if sigma_down == 0:
            return denoised
        d = to_d(x, sigma, denoised)
        return x + d * (sigma_down - sigma) + noise(sigma, sigma_next) * self.s_noise * sigma_up


class Heun(Sampler):
    """Heun's second-order method (Karras et al. 2022, Algorithm 1); Euler on the final step to sigma = 0."""

    name = "heun"

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
        d = to_d(x, sigma, denoised)
        dt = sigma_next - sigma
        if sigma_next == 0:
            return x + d * dt
        x_2 = x + d * dt
        d_2 = to_d(x_2, sigma_next, call_model(model, x_2, sigma_next))
        return x + (d + d_2) / 2 * dt


class HeunPP2(Sampler):
    """Heun++: up to three derivative evaluations weighted by sigma / (k * sigma_0) (sd-webui-samplers-scheduler)."""

    name = "heunpp2"

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
        sigma, s_end = sigmas[i], sigmas[-1]
        denoised = call_model(model, x, sigma)
        state[DENOISED] = denoised
        d = to_d(x, sigma, denoised)
        dt = sigmas[i + 1] - sigma
        if sigmas[i + 1] == s_end:
            return x + d * dt
        x_2 = x + d * dt
        d_2 = to_d(x_2, sigmas[i + 1], call_model(model, x_2, sigmas[i + 1]))
        if sigmas[i + 2] == s_end:
            w2 = sigmas[i + 1] / (2 * sigmas[0])
            return x + (d * (1 - w2) + d_2 * w2) * dt
        x_3 = x_2 + d_2 * (sigmas[i + 2] - sigmas[i + 1])
        d_3 = to_d(x_3, sigmas[i + 2], call_model(model, x_3, sigmas[i + 2]))
        w = 3 * sigmas[0]
        w2, w3 = sigmas[i + 1] / w, sigmas[i + 2] / w
        return x + ((1 - w2 - w3) * d + w2 * d_2 + w3 * d_3) * dt


def _dpm2_substep(model: Model, x: Tensor, sigma: Tensor, target: Tensor, d: Tensor) -> Tensor:
    """DPM-Solver-2 as a midpoint rule in log sigma: derivative taken at the geometric mean of the two sigmas."""
    sigma_mid = sigma.log().lerp(target.log(), 0.5).exp()
    x_2 = x + d * (sigma_mid - sigma)
    d_2 = to_d(x_2, sigma_mid, call_model(model, x_2, sigma_mid))
    return x + d_2 * (target - sigma)


class DPM2(Sampler):
    name = "dpm_2"

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
        d = to_d(x, sigma, denoised)
        if sigma_next == 0:
            return x + d * (sigma_next - sigma)
        return _dpm2_substep(model, x, sigma, sigma_next, d)


class DPM2Ancestral(Sampler):
    name = "dpm_2_ancestral"
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
        sigma, sigma_next = sigmas[i], sigmas[i + 1]
        denoised = call_model(model, x, sigma)
        state[DENOISED] = denoised
        d = to_d(x, sigma, denoised)
        if is_const(model_sampling):
            sigma_down, alpha_ratio, renoise = flow_ancestral_step(sigma, sigma_next, self.eta)
            if sigma_down == 0:
                return x + d * (sigma_down - sigma)
            x = _dpm2_substep(model, x, sigma, sigma_down, d)
            return alpha_ratio * x + noise(sigma, sigma_next) * self.s_noise * renoise
        sigma_down, sigma_up = ancestral_step(sigma, sigma_next, self.eta)
        if sigma_down == 0:
            return x + d * (sigma_down - sigma)
        x = _dpm2_substep(model, x, sigma, sigma_down, d)
        return x + noise(sigma, sigma_next) * self.s_noise * sigma_up


def lms_coefficient(order: int, t, i: int, j: int) -> float:
    """Adams-Bashforth weight of history point j: integral over [t_i, t_{i+1}] of its Lagrange basis polynomial."""

    def basis(tau: float) -> float:
        prod = 1.0
        for k in range(order):
            if j != k:
                prod *= (tau - t[i - k]) / (t[i - j] - t[i - k])
        return prod

    from scipy import integrate  # imported here: scipy.integrate costs a second at server start

    return integrate.quad(basis, t[i], t[i + 1], epsrel=1e-4)[0]


class LMS(Sampler):
    """Linear multistep (Adams-Bashforth on the non-uniform sigma grid), up to order 4."""

    name = "lms"

    def __init__(self, order: int = 4) -> None:
        self.order = order

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
        denoised = call_model(model, x, sigmas[i])
        state[DENOISED] = denoised
        ds = stack_history(state, "lms_ds", to_d(x, sigmas[i], denoised), self.order)
        if sigmas[i + 1] == 0:
            return denoised
        cur_order = min(i + 1, self.order)
        t = sigmas.detach().cpu().numpy()
        coeffs = [lms_coefficient(cur_order, t, i, j) for j in range(cur_order)]
        return x + sum(c * d for c, d in zip(coeffs, reversed(ds)))


class IPNDM(Sampler):
    """Improved PNDM (Zhang & Chen, diff-sampler): Adams-Bashforth with fixed weights, up to order 4."""

    name = "ipndm"

    def __init__(self, max_order: int = 4) -> None:
        self.max_order = max_order

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
        t, t_next = sigmas[i], sigmas[i + 1]
        denoised = call_model(model, x, t)
        state[DENOISED] = denoised
        d = (x - denoised) / t
        buf = list(state["ipndm_buf"].unbind(0)) if "ipndm_buf" in state else []
        order = min(self.max_order, i + 1)
        if t_next == 0:
            x_next = denoised
        elif order == 1:
            x_next = x + (t_next - t) * d
        else:
            x_next = x + self._increment(sigmas, i, order, d, buf)
        stack_history(state, "ipndm_buf", d, self.max_order - 1)
        return x_next

    def _increment(self, s: Tensor, i: int, order: int, d: Tensor, buf: list[Tensor]) -> Tensor:
        """x_next - x for a multistep order >= 2: fixed Adams-Bashforth weights."""
        dt = s[i + 1] - s[i]
        if order == 2:
            return dt * (3 * d - buf[-1]) / 2
        if order == 3:
            return dt * (23 * d - 16 * buf[-1] + 5 * buf[-2]) / 12
        return dt * (55 * d - 59 * buf[-1] + 37 * buf[-2] - 9 * buf[-3]) / 24


class IPNDMV(IPNDM):
    """Variable-step iPNDM: the Adams-Bashforth weights follow the actual (non-uniform) sigma steps."""

    name = "ipndm_v"

    def _increment(self, s: Tensor, i: int, order: int, d: Tensor, buf: list[Tensor]) -> Tensor:
        return (s[i + 1] - s[i]) * self._combination(s, i, order, d, buf)

    @staticmethod
    def _combination(s: Tensor, i: int, order: int, d: Tensor, buf: list[Tensor]) -> Tensor:
        h = s[i + 1] - s[i]
        h1 = s[i] - s[i - 1]
        if order == 2:
            return (2 + h / h1) / 2 * d + (-(h / h1) / 2) * buf[-1]
        h2 = s[i - 1] - s[i - 2]
        temp1 = (1 - h / (3 * (h + h1)) * (h * (h + h1)) / (h1 * (h1 + h2))) / 2
        if order == 3:
            c1 = (2 + h / h1) / 2 + temp1
            c2 = -(h / h1) / 2 - (1 + h1 / h2) * temp1
            c3 = temp1 * h1 / h2
            return c1 * d + c2 * buf[-1] + c3 * buf[-2]
        h3 = s[i - 2] - s[i - 3]
        temp2 = (
            ((1 - h / (3 * (h + h1))) / 2 + (1 - h / (2 * (h + h1))) * h / (6 * (h + h1 + h2)))
            * (h * (h + h1) * (h + h1 + h2))
            / (h1 * (h1 + h2) * (h1 + h2 + h3))
        )
        r = h1 * (h1 + h2) / (h2 * (h2 + h3))
        c1 = (2 + h / h1) / 2 + temp1 + temp2
        c2 = -(h / h1) / 2 - (1 + h1 / h2) * temp1 - (1 + h1 / h2 + r) * temp2
        c3 = temp1 * h1 / h2 + (h1 / h2 + r * (1 + h2 / h3)) * temp2
        c4 = -temp2 * r * h1 / h2
        return c1 * d + c2 * buf[-1] + c3 * buf[-2] + c4 * buf[-3]


class GradientEstimation(Sampler):
    """Euler plus a correction (gamma - 1)(d - d_prev) that extrapolates the denoiser's gradient
    (Permenter & Yuan, 'Interpreting and improving diffusion models from an optimization perspective')."""

    name = "gradient_estimation"

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
        denoised = call_model(model, x, sigmas[i])
        state[DENOISED] = denoised
        d = to_d(x, sigmas[i], denoised)
        old_d = state.get("old_d")
        state["old_d"] = d
        dt = sigmas[i + 1] - sigmas[i]
        if sigmas[i + 1] == 0:
            return denoised
        x = x + d * dt
        if i >= 1 and old_d is not None:
            x = x + (self.ge_gamma - 1) * (d - old_d) * dt
        return x


__all__ = [
    "Euler",
    "EulerAncestral",
    "Heun",
    "HeunPP2",
    "DPM2",
    "DPM2Ancestral",
    "LMS",
    "IPNDM",
    "IPNDMV",
    "GradientEstimation",
]
