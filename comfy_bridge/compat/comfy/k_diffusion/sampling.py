"""`comfy.k_diffusion.sampling`: k-diffusion's sampler functions and helpers, driving our own samplers.

Each `sample_<name>(model, x, sigmas, extra_args=None, callback=None, disable=None, **options)` runs the
step function of nodes.sampling.samplers' sampler of that name in a loop around `model(x, sigma, **extra_args)`,
so a pack's own sampling loop gets this backend's numbers (which match ComfyUI's). The per-step noise is
ComfyUI's: a generator seeded with `extra_args["seed"]` (Brownian tree for the SDE samplers), or the pack's
`noise_sampler`. sample_dpm_fast / sample_dpm_adaptive take the schedule's ends, as k-diffusion's do (their
callback comes once per model evaluation / attempted step here). ddim and uni_pc are not k-diffusion functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from comfy_bridge.packs.origin import UnsupportedFeature
from nodes.sampling import schedules
from nodes.sampling.model_sampling import ModelSampling
from nodes.sampling.noise import BrownianNoise, GaussianNoise
from nodes.sampling.sampler_base import DENOISED, append_dims, half_log_snr, sigma_from_half_log_snr, to_d
from nodes.sampling.samplers import SAMPLER_NAMES, SAMPLER_OPTIONS, configured_sampler

__all__ = [
    "append_dims",
    "append_zero",
    "to_d",
    "sigma_to_half_log_snr",
    "half_log_snr_to_sigma",
    "get_ancestral_step",
    "default_noise_sampler",
    "BrownianTreeNoiseSampler",
    "get_sigmas_karras",
    "get_sigmas_exponential",
    "get_sigmas_polyexponential",
    "get_sigmas_vp",
    "get_sigmas_laplace",
]

# k-diffusion options our samplers do not take, and the value at which ComfyUI's result does not depend on them.
_NEUTRAL = {"s_churn": 0.0, "s_tmin": 0.0, "s_tmax": math.inf, "s_noise": 1.0, "eta": 0.0}
# Not k-diffusion functions of the common signature (dpm_fast / dpm_adaptive are defined below).
_NOT_FUNCTIONS = {"ddim", "uni_pc", "uni_pc_bh2", "dpm_fast", "dpm_adaptive"}


def get_sigmas_karras(n: int, sigma_min: float, sigma_max: float, rho: float = 7.0, device: Any = "cpu") -> Tensor:
    return schedules.karras(n, sigma_min, sigma_max, rho).to(device)


def get_sigmas_exponential(n: int, sigma_min: float, sigma_max: float, device: Any = "cpu") -> Tensor:
    return schedules.exponential(n, sigma_min, sigma_max).to(device)


def get_sigmas_polyexponential(
    n: int, sigma_min: float, sigma_max: float, rho: float = 1.0, device: Any = "cpu"
) -> Tensor:
    return schedules.polyexponential(n, sigma_min, sigma_max, rho).to(device)


def get_sigmas_vp(
    n: int, beta_d: float = 19.9, beta_min: float = 0.1, eps_s: float = 1e-3, device: Any = "cpu"
) -> Tensor:
    return schedules.vp(n, beta_d, beta_min, eps_s).to(device)


def get_sigmas_laplace(
    n: int, sigma_min: float, sigma_max: float, mu: float = 0.0, beta: float = 0.5, device: Any = "cpu"
) -> Tensor:
    return schedules.laplace(n, sigma_min, sigma_max, mu, beta).to(device)


def append_zero(x: Tensor) -> Tensor:
    return torch.cat([x, x.new_zeros([1])])


def sigma_to_half_log_snr(sigma: Tensor, model_sampling: Any) -> Tensor:
    """lambda = log(alpha / sigma) for our model sampling (rectified flow or not)."""
    return half_log_snr(sigma, _ours(model_sampling))


def half_log_snr_to_sigma(half_log_snr_: Tensor, model_sampling: Any) -> Tensor:
    return sigma_from_half_log_snr(half_log_snr_, _ours(model_sampling))


def get_ancestral_step(sigma_from: Any, sigma_to: Any, eta: float = 1.0) -> tuple[Any, Any]:
    """(sigma_down, sigma_up): k-diffusion's split of a step into a deterministic part and fresh noise."""
    if not eta:
        return sigma_to, 0.0
    sigma_up = min(sigma_to, eta * (sigma_to**2 * (sigma_from**2 - sigma_to**2) / sigma_from**2) ** 0.5)
    return (sigma_to**2 - sigma_up**2) ** 0.5, sigma_up


def default_noise_sampler(x: Tensor, seed: int | None = None) -> Callable[[Tensor, Tensor], Tensor]:
    """randn of x's shape: from a generator seeded with `seed`, or torch's global one without a seed."""
    if seed is None:
        return lambda sigma, sigma_next: torch.randn_like(x)
    return GaussianNoise(x, seed)


class BrownianTreeNoiseSampler:
    """Unit-variance Brownian increments over sigma in [sigma_min, sigma_max] (our BrownianNoise)."""

    def __init__(
        self,
        x: Tensor,
        sigma_min: Any,
        sigma_max: Any,
        seed: int | None = None,
        transform: Any = None,
        cpu: bool = False,
    ) -> None:
        if transform is not None:
            raise UnsupportedFeature("BrownianTreeNoiseSampler(transform=...)", "only sigma itself is supported")
        if seed is None:
            seed = int(torch.randint(0, 2**63 - 1, []).item())
        ends = torch.stack([torch.as_tensor(sigma_max), torch.as_tensor(sigma_min)]).float()
        self._noise = BrownianNoise(x, ends, seed, on_device=not cpu)

    def __call__(self, sigma: Tensor, sigma_next: Tensor) -> Tensor:
        return self._noise(sigma, sigma_next)


class _PackNoise:
    """A pack's noise_sampler(sigma, sigma_next) in the shape our samplers draw from."""

    def __init__(self, fn: Callable[[Tensor, Tensor], Tensor]) -> None:
        self.fn = fn

    def __call__(self, sigma: Tensor, sigma_next: Tensor) -> Tensor:
        return self.fn(sigma, sigma_next)

    def save_state(self, state: dict) -> None:
        return None


class _BoundModel:
    """model(x, sigma) over a pack's model(x, sigma, **extra_args). For CFG++ samplers it registers a post-CFG
    function that keeps the negative side's prediction, as ComfyUI's do (our samplers read `uncond_denoised`)."""

    def __init__(self, model: Callable[..., Tensor], extra_args: dict, cfg_pp: bool) -> None:
        self.model, self.extra_args, self.uncond_denoised = model, dict(extra_args), None
        if cfg_pp:
            options = dict(self.extra_args.get("model_options") or {})
            options["sampler_post_cfg_function"] = list(options.get("sampler_post_cfg_function", [])) + [self._keep]
            options["disable_cfg1_optimization"] = True
            self.extra_args["model_options"] = options

    def _keep(self, args: dict) -> Tensor:
        self.uncond_denoised = args["uncond_denoised"]
        return args["denoised"]

    def __call__(self, x: Tensor, sigma: Tensor) -> Tensor:
        return self.model(x, sigma, **self.extra_args)


def _model_sampling(model: Any) -> ModelSampling | None:
    """The model's sampling where ComfyUI's samplers look for it, if it is ours (a flow model's samplers switch
    formulation); None means an eps / v model."""
    inner = getattr(model, "inner_model", model)
    patcher = getattr(inner, "model_patcher", None)
    found = patcher.get_model_object("model_sampling") if hasattr(patcher, "get_model_object") else None
    for holder in (inner, getattr(inner, "inner_model", None)):
        found = found if found is not None else getattr(holder, "model_sampling", None)
    return found if isinstance(found, ModelSampling) else None


def _ours(model_sampling: Any) -> ModelSampling:
    if not isinstance(model_sampling, ModelSampling):
        raise UnsupportedFeature(
            "comfy.k_diffusion.sampling with ComfyUI's model_sampling objects",
            "pass this backend's (a MODEL's get_model_object('model_sampling') gives it)",
        )
    return model_sampling


def _settings(name: str, options: dict) -> dict:
    probe = configured_sampler(name)
    ours = {}
    for key, value in options.items():
        if key in SAMPLER_OPTIONS and hasattr(probe, key):
            ours[key] = value
        elif key not in _NEUTRAL or value != _NEUTRAL[key]:
            raise UnsupportedFeature(
                f"comfy.k_diffusion.sampling.sample_{name}({key}={value!r})", "this sampler takes no such setting here"
            )
    return ours


def _run(
    name: str,
    model: Callable[..., Tensor],
    x: Tensor,
    sigmas: Tensor,
    extra_args: dict | None,
    callback: Callable[[dict], Any] | None,
    noise_sampler: Callable | None,
    options: dict,
) -> Tensor:
    sampler = configured_sampler(name, _settings(name, options))
    extra_args = extra_args or {}
    bound = _BoundModel(model, extra_args, sampler.cfg_pp)
    state: dict[str, Tensor] = {}
    seed = extra_args.get("seed")
    if noise_sampler is not None:
        noise = _PackNoise(noise_sampler)
    elif seed is None and sampler.noise_kind == "gaussian":
        noise = _PackNoise(default_noise_sampler(x))
    else:
        if seed is None:
            seed = int(torch.randint(0, 2**63 - 1, []).item())
        noise = sampler.make_noise(seed, x, sigmas, state)
    ms = _model_sampling(model)
    i = 0
    while not sampler.finished(i, sigmas, state):
        x_in = x
        x = sampler.step(bound, x, sigmas, i, state, noise, model_sampling=ms)
        if callback is not None:
            sigma = sigmas[min(i, len(sigmas) - 1)]  # dpm_adaptive takes more steps than its two sigmas
            callback({"x": x_in, "i": i, "sigma": sigma, "sigma_hat": sigma, "denoised": state[DENOISED]})
        i += 1
    return x


def _function(name: str) -> Callable[..., Tensor]:
    def sample(
        model: Callable[..., Tensor],
        x: Tensor,
        sigmas: Tensor,
        extra_args: dict | None = None,
        callback: Callable[[dict], Any] | None = None,
        disable: bool | None = None,
        noise_sampler: Callable | None = None,
        **options: Any,
    ) -> Tensor:
        return _run(name, model, x, sigmas, extra_args, callback, noise_sampler, options)

    sample.__name__ = sample.__qualname__ = f"sample_{name}"
    sample.__doc__ = f"k-diffusion's sample_{name}, run by this backend's {name!r} sampler."
    return sample


def sample_dpm_fast(
    model: Callable[..., Tensor],
    x: Tensor,
    sigma_min: Any,
    sigma_max: Any,
    n: int,
    extra_args: dict | None = None,
    callback: Callable[[dict], Any] | None = None,
    disable: bool | None = None,
    eta: float = 0.0,
    s_noise: float = 1.0,
    noise_sampler: Callable | None = None,
) -> Tensor:
    """DPM-Solver-fast from sigma_max to sigma_min in n model evaluations."""
    if sigma_min <= 0 or sigma_max <= 0:
        raise ValueError("sigma_min and sigma_max must not be 0")
    # our dpm_fast reads only the schedule's ends and its length
    sigmas = torch.linspace(float(sigma_max), float(sigma_min), n + 1)
    return _run("dpm_fast", model, x, sigmas, extra_args, callback, noise_sampler, {"eta": eta, "s_noise": s_noise})


def sample_dpm_adaptive(
    model: Callable[..., Tensor],
    x: Tensor,
    sigma_min: Any,
    sigma_max: Any,
    extra_args: dict | None = None,
    callback: Callable[[dict], Any] | None = None,
    disable: bool | None = None,
    noise_sampler: Callable | None = None,
    return_info: bool = False,
    **options: Any,
) -> Tensor:
    """DPM-Solver-12 / 23 with adaptive steps from sigma_max to sigma_min."""
    if sigma_min <= 0 or sigma_max <= 0:
        raise ValueError("sigma_min and sigma_max must not be 0")
    if return_info:
        raise UnsupportedFeature(
            "comfy.k_diffusion.sampling.sample_dpm_adaptive(return_info=True)",
            "the solver's step statistics are not kept",
        )
    sigmas = torch.tensor([float(sigma_max), float(sigma_min)])
    return _run("dpm_adaptive", model, x, sigmas, extra_args, callback, noise_sampler, options)


__all__ += ["sample_dpm_fast", "sample_dpm_adaptive"]
for _name in SAMPLER_NAMES:
    if _name not in _NOT_FUNCTIONS:
        globals()[f"sample_{_name}"] = _function(_name)
        __all__.append(f"sample_{_name}")
