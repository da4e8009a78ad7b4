"""One invocation per step, with the state serialised between steps, equals the single loop bit for bit."""

from __future__ import annotations

import io

import pytest
import torch
from toy_gaussian import flow_denoiser, ve_denoiser

from nodes.sampling.model_sampling import model_sampling_from_config
from nodes.sampling.samplers import SAMPLER_NAMES, SAMPLERS, run_step, sample
from nodes.sampling.schedules import ksampler_sigmas

FLOW_UNSUPPORTED = {"ddpm"}  # DDPM's posterior is defined for VP schedules only


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(1)


def _roundtrip(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf)


def _setup(kind: str, name: str, steps: int = 6):
    if kind == "ve":
        ms, den = model_sampling_from_config({"kind": "discrete"}), ve_denoiser
    else:
        ms, den = model_sampling_from_config({"kind": "flux", "shift": 1.15}), flow_denoiser
    sigmas = ksampler_sigmas(ms, "karras" if kind == "ve" else "simple", steps, 1.0, sampler_name=name)
    n = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(5))
    return ms, den, sigmas, ms.noise_scaling(sigmas[0], n, torch.zeros_like(n), max_denoise=True)


def test_sampler_names_follow_comfyui_and_include_the_required_ones():
    required = {
        "euler",
        "euler_ancestral",
        "heun",
        "dpm_2",
        "dpm_2_ancestral",
        "lms",
        "dpmpp_2s_ancestral",
        "dpmpp_sde",
        "dpmpp_2m",
        "dpmpp_2m_sde",
        "dpmpp_3m_sde",
        "ddpm",
        "lcm",
        "ddim",
        "uni_pc",
    }
    assert required <= set(SAMPLER_NAMES) and set(SAMPLER_NAMES) == set(SAMPLERS)
    assert SAMPLER_NAMES[:3] == ["euler", "euler_cfg_pp", "euler_ancestral"]
    assert SAMPLER_NAMES[-3:] == ["ddim", "uni_pc", "uni_pc_bh2"]


@pytest.mark.parametrize(
    "kind,name", [("ve", n) for n in SAMPLER_NAMES] + [("flow", n) for n in SAMPLER_NAMES if n not in FLOW_UNSUPPORTED]
)
def test_per_step_execution_is_bit_identical(kind, name):
    ms, den, sigmas, x = _setup(kind, name)
    seen = []
    whole = sample(
        den, x.clone(), sigmas, name, seed=2**64 - 1, model_sampling=ms, callback=lambda i, xi, d: seen.append((i, d))
    )
    state: dict = {}
    xs = x.clone()
    i = 0
    while not SAMPLERS[name].finished(i, sigmas, state):  # len(sigmas) - 1 steps but for dpm_adaptive
        moved = _roundtrip({"x": xs, "state": state})
        xs, state = moved["x"], moved["state"]
        assert all(isinstance(v, torch.Tensor) for v in state.values()), f"non-tensor state: {state.keys()}"
        xs = run_step(den, xs, sigmas, i, name, 2**64 - 1, state, model_sampling=ms)
        assert torch.equal(state["denoised"], seen[i][1]), f"{name} step {i}: preview differs"
        i += 1
    diff = (whole - xs).abs().max().item()
    assert torch.equal(whole, xs), f"{kind} {name}: max abs diff {diff}"
    assert torch.isfinite(whole).all() and [k for k, _ in seen] == list(range(i))


@pytest.mark.parametrize("name", ["euler_ancestral", "dpmpp_2m_sde", "ddpm"])
def test_the_seed_drives_the_step_noise(name):
    ms, den, sigmas, x = _setup("ve", name)
    a = sample(den, x.clone(), sigmas, name, seed=1, model_sampling=ms)
    b = sample(den, x.clone(), sigmas, name, seed=2, model_sampling=ms)
    assert not torch.equal(a, b), f"{name}: seed had no effect"
    assert torch.equal(a, sample(den, x.clone(), sigmas, name, seed=1, model_sampling=ms))
