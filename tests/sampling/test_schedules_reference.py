"""Each of ComfyUI's nine schedulers against diffusers or a closed form, plus KSampler's denoise/step cuts."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
import torch
from diffusers import DDPMScheduler, EulerDiscreteScheduler

from nodes.sampling.model_sampling import model_sampling_from_config
from nodes.sampling.schedules import SCHEDULER_NAMES, advanced_sigmas, calculate_sigmas, ksampler_sigmas

SD1 = {"kind": "discrete", "beta_schedule": "scaled_linear", "linear_start": 0.00085, "linear_end": 0.012}
SD3 = {"kind": "flow", "shift": 3.0, "multiplier": 1000}


@pytest.fixture(scope="module")
def sd1():
    return model_sampling_from_config(SD1)


@pytest.fixture(scope="module")
def table() -> torch.Tensor:
    """diffusers' SD1 sigma table (independent of our ModelSampling), float64."""
    ac = DDPMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear").alphas_cumprod.double()
    return ((1 - ac) / ac) ** 0.5


def _euler(**kw) -> EulerDiscreteScheduler:
    return EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", **kw)


def _check(got: torch.Tensor, ref: torch.Tensor, tol: float, what: str) -> None:
    assert got.dtype == torch.float32, what
    assert got.shape == ref.shape, f"{what}: shape {tuple(got.shape)} vs {tuple(ref.shape)}"
    diff = (got.double() - ref.double()).abs().max().item()
    assert diff < tol, f"{what}: max abs diff {diff}"


def test_names_in_comfyui_order():
    assert SCHEDULER_NAMES == [
        "simple",
        "sgm_uniform",
        "karras",
        "exponential",
        "ddim_uniform",
        "beta",
        "normal",
        "linear_quadratic",
        "kl_optimal",
    ]


@pytest.mark.parametrize("steps", [5, 20])
def test_karras_matches_diffusers(sd1, steps):
    ref = _euler(use_karras_sigmas=True)
    ref.set_timesteps(steps)
    _check(calculate_sigmas(sd1, "karras", steps), ref.sigmas, 5e-5 * 14.6, f"karras {steps}")


@pytest.mark.parametrize("steps", [5, 20])
def test_exponential_matches_diffusers(sd1, steps):
    ref = _euler(use_exponential_sigmas=True)
    ref.set_timesteps(steps)
    _check(calculate_sigmas(sd1, "exponential", steps), ref.sigmas, 5e-5 * 14.6, f"exponential {steps}")


@pytest.mark.parametrize("steps", [4, 10, 28])  # 999 / (steps - 1) is an integer: every timestep is a table entry
def test_normal_matches_diffusers_linspace_spacing(sd1, steps):
    ref = _euler(timestep_spacing="linspace")
    ref.set_timesteps(steps)
    _check(calculate_sigmas(sd1, "normal", steps), ref.sigmas, 2e-4, f"normal {steps}")


@pytest.mark.parametrize("steps", [3, 9, 27])  # 999 / steps is an integer
def test_sgm_uniform_drops_the_final_timestep(sd1, table, steps):
    idx = [999 - k * (999 // steps) for k in range(steps)]
    ref = torch.cat([table[idx], torch.zeros(1, dtype=torch.float64)])
    _check(calculate_sigmas(sd1, "sgm_uniform", steps), ref, 2e-4, f"sgm_uniform {steps}")


@pytest.mark.parametrize("steps", [1, 7, 20, 30])
def test_simple_takes_every_nth_table_entry_from_the_top(sd1, table, steps):
    idx = [999 - math.floor(k * 1000 / steps) for k in range(steps)]
    ref = torch.cat([table[idx], torch.zeros(1, dtype=torch.float64)])
    _check(calculate_sigmas(sd1, "simple", steps), ref, 2e-4, f"simple {steps}")


@pytest.mark.parametrize("steps", [10, 20, 33])
def test_ddim_uniform_is_ddims_timestep_skip(sd1, table, steps):
    c = 1000 // steps
    idx = list(range(1, 1000, c))[::-1]
    ref = torch.cat([table[idx], torch.zeros(1, dtype=torch.float64)])
    _check(calculate_sigmas(sd1, "ddim_uniform", steps), ref, 2e-4, f"ddim_uniform {steps}")


@pytest.mark.parametrize("steps", [10, 25])
def test_beta_uses_beta_distribution_quantiles(sd1, table, steps):
    q = scipy.stats.beta.ppf(1 - np.arange(steps) / steps, 0.6, 0.6)
    idx = sorted({int(round(v * 999)) for v in q}, reverse=True)
    ref = torch.cat([table[idx], torch.zeros(1, dtype=torch.float64)])
    _check(calculate_sigmas(sd1, "beta", steps), ref, 2e-4, f"beta {steps}")


@pytest.mark.parametrize("steps", [8, 21])
def test_linear_quadratic_is_c1_and_ends_at_zero(steps):
    ms = model_sampling_from_config(SD3)
    sig = calculate_sigmas(ms, "linear_quadratic", steps).double()
    thr, lin = 0.025, steps // 2
    u = 1 - sig / float(ms.sigma_max)  # progress, 0 -> 1
    # Linear part: equal increments of thr / lin.
    diff_lin = (u[:lin] - torch.arange(lin, dtype=torch.float64) * thr / lin).abs().max().item()
    assert diff_lin < 1e-6, f"linear part max abs diff {diff_lin}"
    # Quadratic part q(i) = a i^2 + b i + c fixed by q(lin) = thr, q'(lin) = thr / lin, q(steps) = 1.
    A = np.array([[lin**2, lin, 1], [2 * lin, 1, 0], [steps**2, steps, 1]], dtype=np.float64)
    a, b, c = np.linalg.solve(A, np.array([thr, thr / lin, 1.0]))
    i = np.arange(lin, steps + 1)
    diff_q = np.abs(u[lin:].numpy() - (a * i**2 + b * i + c)).max()
    assert diff_q < 1e-6, f"quadratic part max abs diff {diff_q}"
    assert sig[-1] == 0 and len(sig) == steps + 1


@pytest.mark.parametrize("steps", [5, 20])
def test_kl_optimal_is_uniform_in_arctan(sd1, steps):
    lo, hi = float(sd1.sigma_min), float(sd1.sigma_max)
    w = np.linspace(0, 1, steps)
    ref = torch.tensor(list(np.tan((1 - w) * math.atan(hi) + w * math.atan(lo))) + [0.0], dtype=torch.float64)
    _check(calculate_sigmas(sd1, "kl_optimal", steps), ref, 5e-5 * 14.6, f"kl_optimal {steps}")


@pytest.mark.parametrize("name", SCHEDULER_NAMES)
def test_every_schedule_descends_to_zero_for_flow_models(name):
    ms = model_sampling_from_config(SD3)
    sig = calculate_sigmas(ms, name, 12)
    assert sig.dtype == torch.float32 and sig[-1] == 0 and float(sig[0]) <= 1.0 + 1e-6, sig
    assert (sig[1:] <= sig[:-1]).all(), f"{name} not descending: {sig}"


def test_denoise_keeps_the_tail_of_a_longer_schedule(sd1):
    full = calculate_sigmas(sd1, "karras", int(10 / 0.6))
    got = ksampler_sigmas(sd1, "karras", 10, 0.6)
    assert torch.equal(got, full[-11:]), f"max abs diff {(got - full[-11:]).abs().max().item()}"
    assert ksampler_sigmas(sd1, "karras", 10, 0.0).numel() == 0
    assert torch.equal(ksampler_sigmas(sd1, "karras", 10, 1.0), calculate_sigmas(sd1, "karras", 10))


def test_discard_penultimate_sigma_samplers(sd1):
    base = calculate_sigmas(sd1, "normal", 11)
    got = ksampler_sigmas(sd1, "normal", 10, 1.0, sampler_name="dpm_2")
    assert len(got) == 11 and torch.equal(got, torch.cat([base[:-2], base[-1:]])), got


def test_advanced_step_range_and_full_denoise(sd1):
    sig = calculate_sigmas(sd1, "normal", 20)
    part = advanced_sigmas(sig, 0, 12, force_full_denoise=False)
    assert torch.equal(part, sig[:13])
    forced = advanced_sigmas(sig, 0, 12, force_full_denoise=True)
    assert forced[-1] == 0 and torch.equal(forced[:-1], sig[:12]) and sig[12] != 0  # input untouched
    assert torch.equal(advanced_sigmas(sig, 12, 10000, True), sig[12:])
    assert advanced_sigmas(sig, 20, 10000, True).numel() == 0
