"""Samplers against diffusers' equivalent schedulers on the closed-form toy denoiser, same sigmas, same noise."""

from __future__ import annotations

import pytest
import torch
from diffusers import (
    DDIMScheduler,
    DDPMScheduler,
    DPMSolverMultistepScheduler,
    EulerAncestralDiscreteScheduler,
    EulerDiscreteScheduler,
    HeunDiscreteScheduler,
    LMSDiscreteScheduler,
)
from toy_gaussian import ve_denoiser

from nodes.sampling.samplers import sample

BETAS = {"beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear"}
SEED = 77


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(1)


def _start(sigma0: float) -> torch.Tensor:
    n = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(0))
    return n * sigma0


def _eps(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """The toy denoiser as an eps-prediction for a VE latent x at sigma."""
    return (x - ve_denoiser(x, torch.tensor([sigma]))) / sigma


def _run_k_scheduler(sched, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """diffusers' k-diffusion-style schedulers keep the VE latent; the model sees sigma via scheduler.sigmas."""
    for t in sched.timesteps:
        sigma = float(
            sched.sigmas[sched.index_for_timestep(t)]
            if hasattr(sched, "index_for_timestep")
            else sched.sigmas[sched.step_index or 0]
        )
        kw = {"generator": generator} if generator is not None else {}
        x = sched.step(_eps(x, sigma), t, x, **kw).prev_sample
    return x


def _assert_close(got: torch.Tensor, ref: torch.Tensor, tol: float, what: str) -> None:
    diff = (got - ref).abs().max().item()
    assert diff < tol, f"{what}: max abs diff {diff}"


def _unique_sigmas(sched) -> torch.Tensor:
    s = sched.sigmas.float()
    keep = [0] + [k for k in range(1, len(s)) if s[k] != s[k - 1]]
    return s[keep]


@pytest.mark.parametrize("karras", [False, True])
def test_euler_matches_euler_discrete(karras):
    sched = EulerDiscreteScheduler(**BETAS, use_karras_sigmas=karras)
    sched.set_timesteps(12)
    sigmas = sched.sigmas.float()
    x = _start(float(sigmas[0]))
    ref = _run_k_scheduler(sched, x.clone())
    _assert_close(sample(ve_denoiser, x.clone(), sigmas, "euler", SEED), ref, 1e-4, "euler")


def test_euler_ancestral_matches_with_the_same_noise_stream():
    sched = EulerAncestralDiscreteScheduler(**BETAS)
    sched.set_timesteps(12)
    sigmas = sched.sigmas.float()
    x = _start(float(sigmas[0]))
    ref = _run_k_scheduler(sched, x.clone(), generator=torch.Generator().manual_seed(SEED + 1))  # CPU: seed + 1
    _assert_close(sample(ve_denoiser, x.clone(), sigmas, "euler_ancestral", SEED), ref, 1e-4, "euler_ancestral")


def test_heun_matches_heun_discrete():
    sched = HeunDiscreteScheduler(**BETAS, use_karras_sigmas=True)
    sched.set_timesteps(10)
    sigmas = _unique_sigmas(sched)
    assert len(sigmas) == 11
    x = _start(float(sigmas[0]))
    ref = _run_k_scheduler(sched, x.clone())
    _assert_close(sample(ve_denoiser, x.clone(), sigmas, "heun", SEED), ref, 1e-4, "heun")


def test_lms_matches_lms_discrete_until_the_final_step():
    sched = LMSDiscreteScheduler(**BETAS)
    sched.set_timesteps(15)
    sigmas = sched.sigmas.float()
    x = _start(float(sigmas[0]))
    ref = x.clone()
    for t in sched.timesteps[:-1]:  # ComfyUI's lms jumps to the prediction on its last step; diffusers does not
        ref = sched.step(_eps(ref, float(sched.sigmas[sched.step_index or 0])), t, ref).prev_sample
    _assert_close(sample(ve_denoiser, x.clone(), sigmas[:-1], "lms", SEED), ref, 2e-4, "lms")
    last = sample(ve_denoiser, x.clone(), sigmas, "lms", SEED)
    _assert_close(last, ve_denoiser(ref, sigmas[-2:-1]), 1e-6, "lms final step")


def test_dpmpp_2m_matches_dpmsolver_plus_plus_2m():
    sched = DPMSolverMultistepScheduler(
        **BETAS,
        algorithm_type="dpmsolver++",
        solver_order=2,
        use_karras_sigmas=True,
        final_sigmas_type="zero",
        lower_order_final=True,
    )
    sched.set_timesteps(12)
    sigmas = sched.sigmas.float()
    x = _start(float(sigmas[0]))
    # diffusers' DPM-Solver works on the VP latent x / sqrt(1 + sigma^2).
    xv = x / (1 + sigmas[0] ** 2) ** 0.5
    for k, t in enumerate(sched.timesteps):
        s = float(sigmas[k])
        xv = sched.step(_eps(xv * (1 + s * s) ** 0.5, s), t, xv).prev_sample
    _assert_close(sample(ve_denoiser, x.clone(), sigmas, "dpmpp_2m", SEED), xv, 1e-4, "dpmpp_2m")


def _vp_table_run(sched, steps: int, generator: torch.Generator | None):
    """DDPM/DDIM schedulers on the VP latent; returns (sigmas for our sampler, start VE latent, their result)."""
    sched.set_timesteps(steps)
    ac = sched.alphas_cumprod
    ts = sched.timesteps
    sigmas = torch.cat([((1 - ac[ts]) / ac[ts]) ** 0.5, torch.zeros(1)]).float()
    x = _start(float(sigmas[0]))
    xv = x / (1 + sigmas[0] ** 2) ** 0.5
    for k, t in enumerate(ts):
        s = float(sigmas[k])
        kw = {"generator": generator} if generator is not None else {}
        xv = sched.step(_eps(xv * (1 + s * s) ** 0.5, s), t, xv, **kw).prev_sample
    return sigmas, x, xv


def test_ddim_matches_ddim_eta0():
    sched = DDIMScheduler(**BETAS, clip_sample=False, set_alpha_to_one=True)
    sigmas, x, ref = _vp_table_run(sched, 10, None)
    _assert_close(sample(ve_denoiser, x.clone(), sigmas, "ddim", SEED), ref, 1e-4, "ddim")


def test_ddpm_matches_ddpm_posterior_with_the_same_noise_stream():
    sched = DDPMScheduler(**BETAS, clip_sample=False, variance_type="fixed_small")
    # our CPU per-step stream is seeded with seed + 1 (ComfyUI 0.10.0's default noise sampler)
    sigmas, x, ref = _vp_table_run(sched, 10, torch.Generator().manual_seed(SEED + 1))
    _assert_close(sample(ve_denoiser, x.clone(), sigmas, "ddpm", SEED), ref, 1e-4, "ddpm")
