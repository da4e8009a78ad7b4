"""The sampler registry with ComfyUI's names and defaults, and the two ways to run a sampler.

- `sample(...)`: the whole loop in one process, one noise sampler kept across steps (what ComfyUI does).
- `run_step(...)`: one step, with the noise sampler rebuilt from (seed, state) and saved back, for the cluster's
  one-invocation-per-step execution. Running `run_step` for i = 0..N-1 with `state` serialised in between gives
  bit-identical results to `sample`.

Inputs are in k-diffusion's scale: x = latent + sigma * noise (what ModelSampling.noise_scaling returns).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from torch import Tensor

from .model_sampling import ModelSampling
from .sampler_base import DENOISED, Model, Sampler
from .samplers_cfg_pp import (
    DPMPP2MCFGPP,
    DPMPP2SAncestralCFGPP,
    EulerAncestralCFGPP,
    EulerCFGPPAlternative,
    GradientEstimationCFGPP,
    RESMultistepCFGPP,
)
from .samplers_deis import DEIS
from .samplers_dpm_solver import DPMAdaptive, DPMFast
from .samplers_dpmpp import DPMPP2M, DPMPP2MSDE, DPMPP3MSDE, DPMPPSDE, DPMPP2SAncestral, RESMultistep
from .samplers_markov import DDPM, LCM, LCMUpscale
from .samplers_ode import (
    DPM2,
    IPNDM,
    IPNDMV,
    LMS,
    DPM2Ancestral,
    Euler,
    EulerAncestral,
    GradientEstimation,
    Heun,
    HeunPP2,
)
from .samplers_sa import SASolver
from .samplers_seeds import ERSDE, SEEDS
from .samplers_void import VoidDDIM
from .uni_pc import UniPC


def _named(sampler: Sampler, name: str) -> Sampler:
    sampler.name = name
    return sampler


def _exp_heun_2_x0(eta: float, name: str) -> SEEDS:
    """Exponential Heun in data prediction and log-SNR time: SEEDS-2 with its intermediate point at the step's
    end (r 1) and the phi_2 combination; deterministic at eta 0, stochastic (the _sde variant) at eta 1."""
    sampler = SEEDS(2, eta=eta, s_noise=eta)
    sampler.r, sampler.phi = 1.0, "phi_2"
    return _named(sampler, name)


_ALL: list[Sampler] = [
    Euler(),
    EulerAncestral(),
    Heun(),
    HeunPP2(),
    DPM2(),
    DPM2Ancestral(),
    LMS(),
    DPMPP2SAncestral(),
    DPMPPSDE(),
    DPMPPSDE(name="dpmpp_sde_gpu", noise_kind="brownian_device"),
    DPMPP2M(),
    DPMPP2MSDE(),
    DPMPP2MSDE(name="dpmpp_2m_sde_gpu", noise_kind="brownian_device"),
    DPMPP2MSDE(solver_type="heun", name="dpmpp_2m_sde_heun"),
    DPMPP2MSDE(solver_type="heun", name="dpmpp_2m_sde_heun_gpu", noise_kind="brownian_device"),
    DPMPP3MSDE(),
    DPMPP3MSDE(name="dpmpp_3m_sde_gpu", noise_kind="brownian_device"),
    DDPM(),
    LCM(),
    IPNDM(),
    IPNDMV(),
    RESMultistep(),
    RESMultistep(eta=1.0, name="res_multistep_ancestral"),
    GradientEstimation(),
    # ComfyUI's ddim is euler (its only difference, random inpainting noise, belongs to the masking code).
    _named(Euler(), "ddim"),
    UniPC(),
    UniPC(variant="bh2", name="uni_pc_bh2"),
    EulerAncestralCFGPP(eta=0.0, s_noise=0.0, name="euler_cfg_pp"),
    EulerAncestralCFGPP(),
    DPMPP2SAncestralCFGPP(),
    DPMPP2MCFGPP(),
    RESMultistepCFGPP(),
    RESMultistepCFGPP(eta=1.0, name="res_multistep_ancestral_cfg_pp"),
    GradientEstimationCFGPP(),
    ERSDE(),
    SEEDS(2),
    SEEDS(3),
    _exp_heun_2_x0(0.0, "exp_heun_2_x0"),
    _exp_heun_2_x0(1.0, "exp_heun_2_x0_sde"),
    SASolver(),
    SASolver(use_pece=True),
    DPMFast(),
    DPMAdaptive(),
    DEIS(),
]
SAMPLERS: dict[str, Sampler] = {s.name: s for s in _ALL}
# Samplers only sampler-object nodes give (not in KSampler's list).
OBJECT_SAMPLERS: dict[str, Sampler] = {s.name: s for s in (EulerCFGPPAlternative(), LCMUpscale(), VoidDDIM())}

# ComfyUI's SAMPLER_NAMES order, restricted to the samplers implemented here.
_COMFY_ORDER = [
    "euler",
    "euler_cfg_pp",
    "euler_ancestral",
    "euler_ancestral_cfg_pp",
    "heun",
    "heunpp2",
    "exp_heun_2_x0",
    "exp_heun_2_x0_sde",
    "dpm_2",
    "dpm_2_ancestral",
    "lms",
    "dpm_fast",
    "dpm_adaptive",
    "dpmpp_2s_ancestral",
    "dpmpp_2s_ancestral_cfg_pp",
    "dpmpp_sde",
    "dpmpp_sde_gpu",
    "dpmpp_2m",
    "dpmpp_2m_cfg_pp",
    "dpmpp_2m_sde",
    "dpmpp_2m_sde_gpu",
    "dpmpp_2m_sde_heun",
    "dpmpp_2m_sde_heun_gpu",
    "dpmpp_3m_sde",
    "dpmpp_3m_sde_gpu",
    "ddpm",
    "lcm",
    "ipndm",
    "ipndm_v",
    "deis",
    "res_multistep",
    "res_multistep_cfg_pp",
    "res_multistep_ancestral",
    "res_multistep_ancestral_cfg_pp",
    "gradient_estimation",
    "gradient_estimation_cfg_pp",
    "er_sde",
    "seeds_2",
    "seeds_3",
    "sa_solver",
    "sa_solver_pece",
    "ddim",
    "uni_pc",
    "uni_pc_bh2",
]
SAMPLER_NAMES: list[str] = [n for n in _COMFY_ORDER if n in SAMPLERS]

Callback = Callable[[int, Tensor, Tensor], None]


def get_sampler(name: str) -> Sampler:
    try:
        return SAMPLERS[name] if name in SAMPLERS else OBJECT_SAMPLERS[name]
    except KeyError:
        raise ValueError(f"unknown sampler {name!r}; available: {', '.join(SAMPLER_NAMES)}") from None


# What the sampler-object nodes (SamplerEulerAncestral, SamplerLMS, ...) may set on a sampler's step function.
SAMPLER_OPTIONS = frozenset(
    {
        "eta",
        "s_noise",
        "r",
        "solver_type",
        "order",
        "max_stage",
        "scaler_eta",
        "predictor_order",
        "corrector_order",
        "simple_order_2",
        "tau",
        "rtol",
        "atol",
        "h_init",
        "pcoeff",
        "icoeff",
        "dcoeff",
        "accept_safety",
        "total_upscale",
        "upscale_method",
        "upscale_steps",
        "phi",
        "s_noise_end",
        "noise_clip_std",
    }
)


def configured_sampler(name: str, options: dict[str, Any] | None = None) -> Sampler:
    """The named sampler with `options` replacing its step function's settings (a copy: the registry's
    instance keeps ComfyUI's defaults, which KSampler uses)."""
    sampler = get_sampler(name)
    if not options:
        return sampler
    sampler = copy.copy(sampler)
    for key, value in options.items():
        if key not in SAMPLER_OPTIONS or not hasattr(sampler, key):
            raise ValueError(f"sampler {name!r} has no option {key!r}")
        setattr(sampler, key, value)
    if getattr(sampler, "solver_type", "midpoint") not in ("heun", "midpoint"):
        raise ValueError("solver_type must be 'heun' or 'midpoint'")
    return sampler


def run_step(
    model: Model,
    x: Tensor,
    sigmas: Tensor,
    i: int,
    sampler_name: str,
    seed: int,
    state: dict[str, Tensor],
    model_sampling: ModelSampling | None = None,
    options: dict[str, Any] | None = None,
) -> Tensor:
    """Step i alone: rebuild the noise sampler from (seed, state), step, save the noise state back into `state`.

    Start with an empty `state` at i = 0; afterwards `state["denoised"]` is this step's x0 prediction.
    """
    sampler = configured_sampler(sampler_name, options)
    noise = sampler.make_noise(seed, x, sigmas, state)
    x = sampler.step(model, x, sigmas, i, state, noise, model_sampling=model_sampling)
    noise.save_state(state)
    return x


def sample(
    model: Model,
    noise_scaled_x: Tensor,
    sigmas: Tensor,
    sampler_name: str,
    seed: int,
    callback: Callback | None = None,
    model_sampling: ModelSampling | None = None,
) -> Tensor:
    """Run every step of `sampler_name` over `sigmas`; callback(i, x, denoised) after each step.

    `model_sampling` is needed for rectified-flow models (SD3, Flux): the ancestral and SDE samplers switch to
    their flow formulations and lcm re-noises with the flow interpolation. None means an eps/v model.
    """
    sampler = get_sampler(sampler_name)
    x = noise_scaled_x
    if len(sigmas) <= 1:
        return x
    state: dict[str, Tensor] = {}
    noise = sampler.make_noise(seed, x, sigmas, state)
    i = 0
    while not sampler.finished(i, sigmas, state):
        x = sampler.step(model, x, sigmas, i, state, noise, model_sampling=model_sampling)
        if callback is not None:
            callback(i, x, state[DENOISED])
        i += 1
    return x
