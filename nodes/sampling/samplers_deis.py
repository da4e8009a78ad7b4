"""DEIS, the diffusion exponential integrator sampler (Zhang & Chen 2022, arXiv 2204.13902), in its 'tab' form
as k-diffusion's sample_deis runs it (via the GITS authors' reimplementation): a linear multistep method on
the EDM derivative whose weights integrate the Lagrange basis of the previous time points against the VP
integrand, numerically over 10000 points. A step needs only its own row of weights, computed from the
schedule where it runs; the derivative history travels in the sampler state.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from .model_sampling import ModelSampling
from .noise import NoiseSampler
from .sampler_base import DENOISED, Model, Sampler, call_model, stack_history

HISTORY = "deis_d"
_POINTS = 10000


def _np_log(v: Tensor) -> Tensor:
    """log through numpy, as the reference computes its constants (numpy's and torch's log can differ in
    the last bit)."""
    return torch.from_numpy(np.asarray(np.log(v.numpy())))


def vp_times(
    sigmas: Tensor, eps_s: float = 1e-3, sigma_min: float = 0.002, sigma_max: int = 80
) -> tuple[Tensor, Tensor, Tensor]:
    """EDM sigmas -> VP-SDE times t, with the VP schedule's beta_0 and beta_1 fitted to [sigma_min, sigma_max].
    sigma_max is an integer as in the reference: its constants then come out in float64."""
    beta_d = (
        2
        * (_np_log(torch.tensor(sigma_min) ** 2 + 1) / eps_s - _np_log(torch.tensor(sigma_max) ** 2 + 1))
        / (eps_s - 1)
    )
    beta_min = _np_log(torch.tensor(sigma_max) ** 2 + 1) - 0.5 * beta_d
    sig = sigmas.detach().cpu()
    t = ((beta_min**2 + 2 * beta_d * (sig**2 + 1).log()).sqrt() - beta_min) / beta_d
    return t, beta_min, beta_d + beta_min


def _integrand(beta_0: Tensor, beta_1: Tensor, taus: Tensor) -> Tensor:
    """-1/2 d log(alpha)/dt / sqrt(alpha (1 - alpha)); the derivative by autograd, as the reference takes it."""
    with torch.inference_mode(mode=False):
        taus, beta_0, beta_1 = taus.clone(), beta_0.clone(), beta_1.clone()
        with torch.enable_grad():
            taus.requires_grad_(True)
            alpha = torch.exp(-0.5 * taus**2 * (beta_1 - beta_0) - taus * beta_0)
            alpha.log().sum().backward()
            grad = taus.grad
    return -0.5 * grad / torch.sqrt(alpha.detach() * (1 - alpha.detach()))


def _weights(t: Tensor, beta_0: Tensor, beta_1: Tensor, i: int, order: int) -> list[Tensor]:
    """Step i's weights of the current and the order - 1 previous derivatives."""
    taus = torch.linspace(t[i], t[i + 1], _POINTS)
    dtau = (t[i + 1] - t[i]) / _POINTS
    previous = t[[i - k for k in range(order)]]
    integrand = _integrand(beta_0, beta_1, taus)
    out = []
    for j in range(order):
        poly: Tensor | int = 1
        for k in range(order):
            if k != j:
                poly = poly * ((taus - previous[k]) / (previous[j] - previous[k]))
        out.append(torch.sum(integrand * poly) * dtau)
    return out


class DEIS(Sampler):
    name = "deis"

    def __init__(self, max_order: int = 3) -> None:
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
        t_cur, t_next = sigmas[i], sigmas[i + 1]
        denoised = call_model(model, x, t_cur)
        state[DENOISED] = denoised
        d = (x - denoised) / t_cur
        history = list(state[HISTORY].unbind(0)) if HISTORY in state else []  # oldest first
        order = 1 if t_next <= 0 else min(self.max_order, i + 1)
        if order == 1:
            x_next = x + (t_next - t_cur) * d
        else:
            times, beta_0, beta_1 = vp_times(sigmas)
            weights = _weights(times, beta_0, beta_1, i, order)
            x_next = x + weights[0] * d
            for k in range(1, order):
                x_next = x_next + weights[k] * history[-k]
        if self.max_order > 1:
            stack_history(state, HISTORY, d, self.max_order - 1)
        return x_next
