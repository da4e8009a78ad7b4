"""A data distribution whose denoiser and probability-flow ODE are known in closed form: x0 ~ N(mu, s^2).

VE (eps / v models): x_sigma = x0 + sigma * n, so E[x0 | x] = (x s^2 + mu sigma^2) / (s^2 + sigma^2) and the ODE
dx/dsigma = (x - D) / sigma keeps (x - mu) / sqrt(s^2 + sigma^2) constant.
Rectified flow: x_t = (1 - t) x0 + t n, so E[x0 | x] = mu + (1 - t) s^2 / ((1 - t)^2 s^2 + t^2) (x - (1 - t) mu).
"""

from __future__ import annotations

from torch import Tensor

MU, S = 0.7, 0.5


def _col(sigma: Tensor, x: Tensor) -> Tensor:
    return sigma.view(-1, *([1] * (x.ndim - 1))).to(x.dtype)


def ve_denoiser(x: Tensor, sigma: Tensor) -> Tensor:
    s = _col(sigma, x)
    return (x * S**2 + MU * s**2) / (S**2 + s**2)


def flow_denoiser(x: Tensor, t: Tensor) -> Tensor:
    t = _col(t, x)
    return MU + (1 - t) * S**2 / ((1 - t) ** 2 * S**2 + t**2) * (x - (1 - t) * MU)


def ve_ode_solution(x_start: Tensor, sigma_start: float, sigma_end: float) -> Tensor:
    """Exact probability-flow ODE transport of x_start from sigma_start to sigma_end."""
    return MU + (x_start - MU) * ((S**2 + sigma_end**2) / (S**2 + sigma_start**2)) ** 0.5
