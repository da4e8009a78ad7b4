"""Samplers on data ~ N(mu, s^2), whose denoiser and ODE solution are closed-form (see toy_gaussian.py).

Deterministic samplers must converge to the exact ODE solution with their order; stochastic ones must sample
the right final distribution and forget their starting noise.
"""

from __future__ import annotations

import math

import pytest
import torch
from toy_gaussian import MU, S, flow_denoiser, ve_denoiser, ve_ode_solution

from nodes.sampling.model_sampling import model_sampling_from_config
from nodes.sampling.samplers import SAMPLERS, sample
from nodes.sampling.samplers_dpmpp import DPMPP2MSDE, DPMPP3MSDE, DPMPPSDE, DPMPP2SAncestral
from nodes.sampling.schedules import ksampler_sigmas

# Observed-order floor per deterministic sampler: theoretical order minus a margin for start-up and last steps.
# heunpp2 and gradient_estimation are first-order heuristics; ComfyUI's multistep ones start at low order.
ORDERS = {
    "euler": 1,
    "ddim": 1,
    "heun": 2,
    "heunpp2": 1,
    "dpm_2": 2,
    "lms": 3,
    "dpmpp_2m": 2,
    "ipndm": 2,
    "ipndm_v": 2,
    "res_multistep": 2,
    "gradient_estimation": 1,
    "uni_pc": 2,
    "uni_pc_bh2": 2,
}
ETA0 = {
    "dpmpp_2s_ancestral": DPMPP2SAncestral(eta=0),
    "dpmpp_sde": DPMPPSDE(eta=0),
    "dpmpp_2m_sde": DPMPP2MSDE(eta=0),
    "dpmpp_2m_sde_heun": DPMPP2MSDE(eta=0, solver_type="heun"),
    "dpmpp_3m_sde": DPMPP3MSDE(eta=0),
}
ETA0_ORDERS = {"dpmpp_2s_ancestral": 2, "dpmpp_sde": 2, "dpmpp_2m_sde": 2, "dpmpp_2m_sde_heun": 2, "dpmpp_3m_sde": 2}


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(1)


def _geometric(n: int, hi: float = 10.0, lo: float = 0.05) -> torch.Tensor:
    return torch.tensor(
        [math.exp(math.log(hi) + (math.log(lo) - math.log(hi)) * k / n) for k in range(n + 1)], dtype=torch.float64
    )


def _ode_error(sampler, n: int) -> float:
    x0 = torch.linspace(-30, 30, 64, dtype=torch.float64).view(1, 1, 8, 8)
    sigmas = _geometric(n)
    state: dict = {}
    noise = sampler.make_noise(0, x0, sigmas, state)
    x = x0.clone()
    for i in range(n):
        x = sampler.step(ve_denoiser, x, sigmas, i, state, noise)
    return (x - ve_ode_solution(x0, 10.0, 0.05)).abs().max().item()


@pytest.mark.parametrize("name", sorted(ORDERS) + [f"{n}(eta=0)" for n in sorted(ETA0)])
def test_deterministic_sampler_converges_with_its_order(name):
    if name.endswith("(eta=0)"):
        base = name[: -len("(eta=0)")]
        sampler, order = ETA0[base], ETA0_ORDERS[base]
    else:
        sampler, order = SAMPLERS[name], ORDERS[name]
    e1, e2 = _ode_error(sampler, 32), _ode_error(sampler, 64)
    observed = math.log2(e1 / e2)
    assert e2 < 0.05, f"{name}: max abs diff to the exact ODE solution {e2} at 64 steps"
    assert observed > order - 0.4, f"{name}: observed order {observed:.2f} (max abs diff {e1:.3g} -> {e2:.3g})"


STOCHASTIC = [
    "euler_ancestral",
    "dpm_2_ancestral",
    "dpmpp_2s_ancestral",
    "dpmpp_sde",
    "dpmpp_sde_gpu",
    "dpmpp_2m_sde",
    "dpmpp_2m_sde_heun",
    "dpmpp_3m_sde",
    "ddpm",
    "res_multistep_ancestral",
]
FLOW_STOCHASTIC = [
    "euler_ancestral",
    "dpm_2_ancestral",
    "dpmpp_2s_ancestral",
    "dpmpp_sde",
    "dpmpp_2m_sde",
    "dpmpp_3m_sde",
]


def _final_samples(kind: str, name: str, steps: int = 60):
    if kind == "ve":
        ms, den, sched = model_sampling_from_config({"kind": "discrete"}), ve_denoiser, "karras"
    else:
        ms, den, sched = model_sampling_from_config({"kind": "flow", "shift": 3.0}), flow_denoiser, "simple"
    sigmas = ksampler_sigmas(ms, sched, steps, 1.0, sampler_name=name)
    n = torch.randn(1, 1, 100, 100, generator=torch.Generator().manual_seed(0))
    x = ms.noise_scaling(sigmas[0], n, torch.zeros_like(n), max_denoise=True)
    return x, sample(den, x, sigmas, name, seed=1, model_sampling=ms)


@pytest.mark.parametrize("kind,name", [("ve", n) for n in STOCHASTIC] + [("flow", n) for n in FLOW_STOCHASTIC])
def test_stochastic_sampler_draws_the_data_distribution(kind, name):
    x_start, out = _final_samples(kind, name)
    mean, std = out.mean().item(), out.std().item()
    assert abs(mean - MU) < 0.03, f"{kind} {name}: mean {mean:.4f}, max abs diff {abs(mean - MU):.4f}"
    assert abs(std - S) < 0.05, f"{kind} {name}: std {std:.4f}, max abs diff {abs(std - S):.4f}"
    # An ODE sampler maps the start noise monotonically (correlation 1); fresh noise each step decorrelates it.
    corr = torch.corrcoef(torch.stack([x_start.flatten(), out.flatten()]))[0, 1].item()
    assert corr < 0.1, f"{kind} {name}: correlation with the starting noise {corr:.3f}"


def test_euler_is_the_ode_control_for_the_correlation_check():
    x_start, out = _final_samples("ve", "euler")
    corr = torch.corrcoef(torch.stack([x_start.flatten(), out.flatten()]))[0, 1].item()
    assert corr > 0.99, f"correlation {corr}"


@pytest.mark.parametrize("kind", ["ve", "flow"])
def test_lcm_with_a_consistency_function_samples_exactly(kind):
    """LCM assumes the model is the consistency function (the ODE's endpoint), not the MMSE denoiser."""
    if kind == "ve":
        ms = model_sampling_from_config({"kind": "discrete"})

        def model(x, sigma):
            s = sigma.view(-1, 1, 1, 1)
            return MU + (x - MU) * S / (S**2 + s**2) ** 0.5
    else:
        ms = model_sampling_from_config({"kind": "flow", "shift": 3.0})

        def model(x, t):
            t = t.view(-1, 1, 1, 1)
            return MU + (x - (1 - t) * MU) * S / ((1 - t) ** 2 * S**2 + t**2) ** 0.5

    sigmas = ksampler_sigmas(ms, "simple", 8, 1.0)
    n = torch.randn(1, 1, 100, 100, generator=torch.Generator().manual_seed(0))
    out = sample(
        model,
        ms.noise_scaling(sigmas[0], n, torch.zeros_like(n), max_denoise=True),
        sigmas,
        "lcm",
        3,
        model_sampling=ms,
    )
    mean, std = out.mean().item(), out.std().item()
    assert abs(mean - MU) < 0.02 and abs(std - S) < 0.02, f"{kind}: mean {mean:.4f}, std {std:.4f}"
