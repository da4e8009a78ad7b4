"""ModelSampling against diffusers' tables and closed forms."""

from __future__ import annotations

import math

import pytest
import torch
from diffusers import DDPMScheduler

from nodes.sampling.model_sampling import model_sampling_from_config

SD1 = {
    "kind": "discrete",
    "prediction": "eps",
    "beta_schedule": "scaled_linear",
    "linear_start": 0.00085,
    "linear_end": 0.012,
    "timesteps": 1000,
}


def diffusers_sd1_sigmas() -> torch.Tensor:
    sched = DDPMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear")
    ac = sched.alphas_cumprod.double()
    return ((1 - ac) / ac) ** 0.5


def test_sd1_sigma_range_is_comfyuis():
    ms = model_sampling_from_config(SD1)
    assert abs(float(ms.sigma_max) - 14.6146) < 1e-4, f"sigma_max {float(ms.sigma_max)}, max abs diff vs 14.6146"
    assert abs(float(ms.sigma_min) - 0.0292) < 1e-4, f"sigma_min {float(ms.sigma_min)}, max abs diff vs 0.0292"


def test_discrete_table_matches_diffusers_alphas_cumprod():
    ms = model_sampling_from_config(SD1)
    ref = diffusers_sd1_sigmas()
    # diffusers builds its betas in float32, so compare relatively (sigmas span 0.03 .. 14.6;
    # float32 betas alone move the smallest sigmas by ~1e-5 relative).
    diff = (ms.sigmas.double() - ref).abs().max().item()
    rel = ((ms.sigmas.double() - ref).abs() / ref).max().item()
    assert ms.sigmas.dtype == torch.float32 and len(ms.sigmas) == 1000
    assert rel < 5e-5, f"max abs diff {diff}, max relative diff {rel}"


def test_timestep_and_sigma_are_inverse_on_the_table():
    ms = model_sampling_from_config(SD1)
    t = torch.tensor([0, 1, 250, 500, 998, 999])
    back = ms.timestep(ms.sigma(t))
    assert torch.equal(back, t), f"timesteps {t.tolist()} came back as {back.tolist()}"
    # Between table points sigma interpolates log sigma linearly.
    mid = ms.sigma(torch.tensor(500.5))
    expect = math.exp(0.5 * (math.log(float(ms.sigmas[500])) + math.log(float(ms.sigmas[501]))))
    assert abs(float(mid) - expect) < 1e-5, f"max abs diff {abs(float(mid) - expect)}"


def test_percent_to_sigma_ends():
    ms = model_sampling_from_config(SD1)
    assert ms.percent_to_sigma(0.0) > 1e8 and ms.percent_to_sigma(1.0) == 0.0
    diff = abs(ms.percent_to_sigma(0.5) - float(ms.sigma(torch.tensor(499.5))))
    assert diff < 1e-6, f"max abs diff {diff}"


def test_zsnr_makes_the_last_sigma_huge_but_finite():
    ms = model_sampling_from_config({**SD1, "zsnr": True})
    assert 4000 < float(ms.sigma_max) < 5000 and torch.isfinite(ms.sigmas).all(), float(ms.sigma_max)


@pytest.mark.parametrize("prediction", ["eps", "v"])
def test_denoised_recovers_x0_from_the_ideal_output(prediction):
    ms = model_sampling_from_config({**SD1, "prediction": prediction})
    g = torch.Generator().manual_seed(0)
    x0, n = torch.randn(2, 4, 8, 8, generator=g), torch.randn(2, 4, 8, 8, generator=g)
    sigma = torch.tensor([3.0, 0.4])
    x = ms.noise_scaling(sigma, n, x0)
    s = sigma.view(2, 1, 1, 1)
    if prediction == "eps":
        out = n
    else:  # v on the VP-scaled input: alpha * n - sigma_vp * x0 with alpha = 1/sqrt(1+s^2), sigma_vp = s*alpha
        out = (n - s * x0) / (1 + s**2) ** 0.5
    got = ms.calculate_denoised(sigma, out, x)
    diff = (got - x0).abs().max().item()
    assert diff < 1e-5, f"max abs diff {diff}"
    inp = ms.calculate_input(sigma, x)
    diff_in = (inp - x / (1 + s**2) ** 0.5).abs().max().item()
    assert diff_in < 1e-6, f"max abs diff {diff_in}"


def test_max_denoise_scales_noise_like_a_vp_sample():
    ms = model_sampling_from_config(SD1)
    n = torch.ones(1, 1, 2, 2)
    got = ms.noise_scaling(ms.sigma_max, n, torch.zeros_like(n), max_denoise=True)
    expect = (1 + float(ms.sigma_max) ** 2) ** 0.5
    assert abs(got.max().item() - expect) < 1e-4, f"max abs diff {abs(got.max().item() - expect)}"


def test_sd3_flow_sigmas_are_shifted_time():
    ms = model_sampling_from_config({"kind": "flow", "shift": 3.0, "multiplier": 1000})
    t = torch.arange(1, 1001, dtype=torch.float64) / 1000
    ref = 3.0 * t / (1 + 2.0 * t)
    diff = (ms.sigmas.double() - ref).abs().max().item()
    assert diff < 1e-6, f"max abs diff {diff}"
    assert float(ms.sigma_max) == 1.0 and ms.is_const
    ts = ms.timestep(torch.tensor(0.25))
    assert abs(float(ts) - 250.0) < 1e-4, f"timestep {float(ts)}"
    assert abs(ms.percent_to_sigma(0.25) - 3 * 0.75 / (1 + 2 * 0.75)) < 1e-9


def test_flux_sigmas_are_flux_time_shift():
    ms = model_sampling_from_config({"kind": "flux", "shift": 1.15})
    t = torch.arange(1, 10001, dtype=torch.float64) / 10000
    ref = math.exp(1.15) / (math.exp(1.15) + (1 / t - 1))
    diff = (ms.sigmas.double() - ref).abs().max().item()
    assert diff < 1e-6, f"max abs diff {diff}"
    assert len(ms.sigmas) == 10000 and torch.equal(ms.timestep(ms.sigmas[:5]), ms.sigmas[:5])


def test_const_noise_scaling_and_inverse():
    ms = model_sampling_from_config({"kind": "flow", "shift": 3.0})
    g = torch.Generator().manual_seed(1)
    x0, n = torch.randn(1, 4, 4, 4, generator=g), torch.randn(1, 4, 4, 4, generator=g)
    sigma = torch.tensor(0.3)
    x = ms.noise_scaling(sigma, n, x0)
    diff = (x - (0.3 * n + 0.7 * x0)).abs().max().item()
    assert diff < 1e-6, f"max abs diff {diff}"
    # velocity v = n - x0 gives back x0
    diff2 = (ms.calculate_denoised(sigma, n - x0, x) - x0).abs().max().item()
    assert diff2 < 1e-5, f"max abs diff {diff2}"
    diff3 = (ms.inverse_noise_scaling(sigma, x) - x / 0.7).abs().max().item()
    assert diff3 < 1e-6, f"max abs diff {diff3}"
