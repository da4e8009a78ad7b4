"""ComfyUI's nine noise schedules, and how KSampler / KSamplerAdvanced cut them for denoise and step ranges.

Every schedule returns a descending float32 tensor of sigmas that ends with 0 (steps + 1 values).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from .model_sampling import ModelSampling


def _append_zero(sigmas: Tensor) -> Tensor:
    return torch.cat([sigmas, sigmas.new_zeros([1])])


def karras(n: int, sigma_min: float, sigma_max: float, rho: float = 7.0) -> Tensor:
    """Karras et al. 2022, eq. 5: uniform in sigma^(1/rho)."""
    ramp = torch.linspace(0, 1, n)
    min_inv_rho, max_inv_rho = sigma_min ** (1 / rho), sigma_max ** (1 / rho)
    return _append_zero((max_inv_rho + ramp * (min_inv_rho - max_inv_rho)) ** rho)


def exponential(n: int, sigma_min: float, sigma_max: float) -> Tensor:
    """Uniform in log sigma."""
    return _append_zero(torch.linspace(math.log(sigma_max), math.log(sigma_min), n).exp())


def polyexponential(n: int, sigma_min: float, sigma_max: float, rho: float = 1.0) -> Tensor:
    """log sigma as a polynomial of degree rho in the ramp 1 -> 0 (rho = 1 is exponential)."""
    ramp = torch.linspace(1, 0, n) ** rho
    return _append_zero(torch.exp(ramp * (math.log(sigma_max) - math.log(sigma_min)) + math.log(sigma_min)))


def vp(n: int, beta_d: float = 19.9, beta_min: float = 0.1, eps_s: float = 1e-3) -> Tensor:
    """The continuous VP-SDE schedule (Song et al. 2021): sigma(t) = sqrt(exp(beta_d t^2 / 2 + beta_min t) - 1)
    for t from 1 down to eps_s."""
    t = torch.linspace(1, eps_s, n)
    return _append_zero(torch.sqrt(torch.special.expm1(beta_d * t**2 / 2 + beta_min * t)))


def laplace(n: int, sigma_min: float, sigma_max: float, mu: float = 0.0, beta: float = 0.5) -> Tensor:
    """Log sigma at the quantiles of a Laplace(mu, beta) (Tiankai et al. 2024), clamped to [sigma_min,
    sigma_max]. Unlike the others it does not end with 0 (k-diffusion's get_sigmas_laplace neither)."""
    x = torch.linspace(0, 1, n)
    lmb = mu - beta * torch.sign(0.5 - x) * torch.log(1 - 2 * torch.abs(0.5 - x) + 1e-5)  # 1e-5: no log(0)
    return torch.clamp(torch.exp(lmb), min=sigma_min, max=sigma_max)


def kl_optimal(n: int, sigma_min: float, sigma_max: float) -> Tensor:
    """Uniform in arctan(sigma) (AYS paper, 'KL optimal')."""
    w = torch.arange(n, dtype=torch.float).div_(n - 1)
    sigmas = w.new_zeros(n + 1)
    sigmas[:-1] = (w * math.atan(sigma_min) + (1 - w) * math.atan(sigma_max)).tan_()
    return sigmas


def simple(ms: ModelSampling, steps: int) -> Tensor:
    """Every len/steps-th entry of the model's sigma table, from the top."""
    stride = len(ms.sigmas) / steps
    sigs = [float(ms.sigmas[-(1 + int(k * stride))]) for k in range(steps)]
    return torch.FloatTensor(sigs + [0.0])


def ddim_uniform(ms: ModelSampling, steps: int) -> Tensor:
    """DDIM's uniform timestep skipping: table entries 1, 1+c, 1+2c, ... (c = len // steps), reversed."""
    if math.isclose(float(ms.sigmas[1]), 0, abs_tol=0.00001):
        steps += 1
        sigs: list[float] = []
    else:
        sigs = [0.0]
    stride = max(len(ms.sigmas) // steps, 1)
    sigs += [float(ms.sigmas[k]) for k in range(1, len(ms.sigmas), stride)]
    return torch.FloatTensor(sigs[::-1])


def normal(ms: ModelSampling, steps: int, sgm: bool = False) -> Tensor:
    """Timesteps evenly spaced between the model's first and last; sgm_uniform drops the final endpoint."""
    start, end = ms.timestep(ms.sigma_max), ms.timestep(ms.sigma_min)
    append_zero = True
    if sgm:
        timesteps = torch.linspace(start, end, steps + 1)[:-1]
    else:
        if math.isclose(float(ms.sigma(end)), 0, abs_tol=0.00001):
            steps += 1
            append_zero = False
        timesteps = torch.linspace(start, end, steps)
    sigs = [float(ms.sigma(t)) for t in timesteps]
    return torch.FloatTensor(sigs + [0.0] if append_zero else sigs)


def sgm_uniform(ms: ModelSampling, steps: int) -> Tensor:
    return normal(ms, steps, sgm=True)


def beta(ms: ModelSampling, steps: int, alpha: float = 0.6, beta_: float = 0.6) -> Tensor:
    """Lee et al. 2024 (arXiv 2407.12173): timesteps at quantiles of a Beta(0.6, 0.6); repeats are dropped."""
    total = len(ms.sigmas) - 1
    import scipy.stats  # imported here: scipy.stats costs a second at server start

    ts = np.rint(scipy.stats.beta.ppf(1 - np.linspace(0, 1, steps, endpoint=False), alpha, beta_) * total)
    sigs: list[float] = []
    last = -1.0
    for t in ts:
        if t != last:
            sigs.append(float(ms.sigmas[int(t)]))
        last = t
    return torch.FloatTensor(sigs + [0.0])


def linear_quadratic(
    ms: ModelSampling, steps: int, threshold_noise: float = 0.025, linear_steps: int | None = None
) -> Tensor:
    """Mochi's schedule: linear for the first half up to threshold_noise, then quadratic to 1; scaled by sigma_max."""
    if steps == 1:
        schedule = [1.0, 0.0]
    else:
        linear_steps = steps // 2 if linear_steps is None else linear_steps
        linear_part = [k * threshold_noise / linear_steps for k in range(linear_steps)]
        diff = linear_steps - threshold_noise * steps
        quad_steps = steps - linear_steps
        quad_coef = diff / (linear_steps * quad_steps**2)
        lin_coef = threshold_noise / linear_steps - 2 * diff / (quad_steps**2)
        const = quad_coef * (linear_steps**2)
        quad_part = [quad_coef * (k**2) + lin_coef * k + const for k in range(linear_steps, steps)]
        schedule = [1.0 - v for v in linear_part + quad_part + [1.0]]
    return torch.FloatTensor(schedule) * ms.sigma_max.cpu()


def _from_range(fn: Callable[[int, float, float], Tensor]) -> Callable[[ModelSampling, int], Tensor]:
    return lambda ms, steps: fn(steps, float(ms.sigma_min), float(ms.sigma_max))


# ComfyUI's order (it is the order of the scheduler combo in /object_info).
SCHEDULERS: dict[str, Callable[[ModelSampling, int], Tensor]] = {
    "simple": simple,
    "sgm_uniform": sgm_uniform,
    "karras": _from_range(karras),
    "exponential": _from_range(exponential),
    "ddim_uniform": ddim_uniform,
    "beta": beta,
    "normal": normal,
    "linear_quadratic": linear_quadratic,
    "kl_optimal": _from_range(kl_optimal),
}
SCHEDULER_NAMES: list[str] = list(SCHEDULERS)

# Samplers whose schedule is computed for one step more and then loses its second-to-last sigma (ComfyUI rule:
# these samplers take a big final step, so the extra sigma keeps the step count).
DISCARD_PENULTIMATE_SIGMA_SAMPLERS = frozenset({"dpm_2", "dpm_2_ancestral", "uni_pc", "uni_pc_bh2"})


def calculate_sigmas(model_sampling: ModelSampling, scheduler_name: str, steps: int) -> Tensor:
    """The full schedule for `steps` steps (steps + 1 sigmas ending in 0)."""
    try:
        fn = SCHEDULERS[scheduler_name]
    except KeyError:
        raise ValueError(f"error invalid scheduler {scheduler_name}") from None
    return fn(model_sampling, steps)


def _sampler_sigmas(ms: ModelSampling, scheduler: str, steps: int, sampler_name: str | None) -> Tensor:
    if sampler_name in DISCARD_PENULTIMATE_SIGMA_SAMPLERS:
        sigmas = calculate_sigmas(ms, scheduler, steps + 1)
        return torch.cat([sigmas[:-2], sigmas[-1:]])
    return calculate_sigmas(ms, scheduler, steps)


def ksampler_sigmas(
    model_sampling: ModelSampling,
    scheduler: str,
    steps: int,
    denoise: float | None = 1.0,
    sampler_name: str | None = None,
) -> Tensor:
    """KSampler's sigmas: with denoise < 1 the schedule is computed for int(steps / denoise) steps and only its
    last steps + 1 sigmas are kept; denoise <= 0 gives an empty tensor (nothing to sample)."""
    if denoise is None or denoise > 0.9999:
        return _sampler_sigmas(model_sampling, scheduler, steps, sampler_name)
    if denoise <= 0.0:
        return torch.FloatTensor([])
    sigmas = _sampler_sigmas(model_sampling, scheduler, int(steps / denoise), sampler_name)
    return sigmas[-(steps + 1) :]


def advanced_sigmas(sigmas: Tensor, start_step: int | None, last_step: int | None, force_full_denoise: bool) -> Tensor:
    """KSamplerAdvanced's cut: keep steps [start_step, last_step]; when the cut ends early and leftover noise is
    not returned (force_full_denoise), the last sigma becomes 0. An empty result means "nothing to sample:
    return the input latent unchanged" (start_step at or past the end)."""
    if last_step is not None and last_step < len(sigmas) - 1:
        sigmas = sigmas[: last_step + 1].clone()
        if force_full_denoise:
            sigmas[-1] = 0
    if start_step is not None:
        if start_step >= len(sigmas) - 1:
            return sigmas[:0]
        sigmas = sigmas[start_step:]
    return sigmas
