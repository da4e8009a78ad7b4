"""SamplerLCM (today's ComfyUI, comfy_extras.nodes_advanced_samplers, newer than 0.10.0): LCM whose per-step
noise is clamped to noise_clip_std of its own standard deviation, then scaled by s_noise at the first step
moving linearly to s_noise_end at the last, before re-noising the prediction to the next sigma.

The reference below follows the equations of ComfyUI's sample_lcm as its newest source states them (no newer
ComfyUI than 0.10.0 runs here to record from); the defaults must give KSampler's plain "lcm" bit for bit,
which tests/packs checks against ComfyUI 0.10.0."""

from __future__ import annotations

import pytest
import torch

from nodes.ksampler import SamplerChoice
from nodes.library.sampler_objects import SamplerLCM
from nodes.sampling.model_sampling import model_sampling_from_config
from nodes.sampling.samplers import run_step, sample
from nodes.sampling.schedules import ksampler_sigmas

SEED = 11


def toy_model(x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """A denoiser whose prediction depends on x and sigma (so every step's input matters)."""
    return torch.tanh(x) * 0.7 / (1.0 + sigma.view(-1, 1, 1, 1))


def run_node_sampler(choice: SamplerChoice, x: torch.Tensor, sigmas: torch.Tensor, ms) -> torch.Tensor:
    state: dict[str, torch.Tensor] = {}
    for i in range(len(sigmas) - 1):
        x = run_step(toy_model, x, sigmas, i, choice.name, SEED, state, model_sampling=ms, options=dict(choice.options))
    return x


def reference_lcm(x, sigmas, ms, s_noise, s_noise_end, noise_clip_std):
    """ComfyUI's sample_lcm with the default noise sampler (a CPU generator seeded with seed + 1)."""
    gen = torch.Generator().manual_seed(SEED + 1)
    n_steps = max(1, len(sigmas) - 1)
    for i in range(len(sigmas) - 1):
        x = toy_model(x, sigmas[i].expand(x.shape[0]))
        if sigmas[i + 1] > 0:
            noise = torch.randn(x.shape, generator=gen)
            if noise_clip_std > 0:
                clip = noise_clip_std * noise.std()
                noise = noise.clamp(min=-clip, max=clip)
            t = i / (n_steps - 1) if n_steps > 1 else 0.0
            noise = noise * (s_noise + (s_noise_end - s_noise) * t)
            x = ms.noise_scaling(sigmas[i + 1], noise, x)
    return x


@pytest.fixture(params=["discrete", "flow"])
def setup(request):
    torch.set_num_threads(1)
    config = {"kind": "discrete"} if request.param == "discrete" else {"kind": "flow", "shift": 3.0}
    ms = model_sampling_from_config(config)
    sigmas = ksampler_sigmas(ms, "simple", 6, 1.0)
    x = ms.noise_scaling(
        sigmas[0],
        torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(3)),
        torch.zeros(2, 4, 8, 8),
        max_denoise=True,
    )
    return ms, sigmas, x


def test_defaults_are_the_plain_lcm_sampler(setup):
    ms, sigmas, x = setup
    (choice,) = SamplerLCM().get_sampler(1.0, 1.0, 0.0)
    plain = sample(toy_model, x, sigmas, "lcm", SEED, model_sampling=ms)
    assert torch.equal(run_node_sampler(choice, x, sigmas, ms), plain)


@pytest.mark.parametrize(("s_noise", "s_noise_end", "clip"), [(1.02, 1.0, 0.0), (1.0, 1.0, 2.5), (1.5, 0.25, 0.8)])
def test_scaled_and_clipped_noise_follow_comfyui(setup, s_noise, s_noise_end, clip):
    ms, sigmas, x = setup
    (choice,) = SamplerLCM().get_sampler(s_noise, s_noise_end, clip)
    ours = run_node_sampler(choice, x, sigmas, ms)
    theirs = reference_lcm(x, sigmas, ms, s_noise, s_noise_end, clip)
    assert torch.equal(ours, theirs)
    # and the settings change the result (a sampler that ignored them would match the plain one)
    assert not torch.equal(ours, sample(toy_model, x, sigmas, "lcm", SEED, model_sampling=ms))


def test_clipping_bounds_each_steps_noise():
    """With one step left to re-noise and a zero prediction, the result is sigma * the clipped noise."""
    ms = model_sampling_from_config({"kind": "discrete"})
    sigmas = torch.tensor([2.0, 1.0, 0.0])
    (choice,) = SamplerLCM().get_sampler(1.0, 1.0, 0.5)
    x = torch.randn(1, 4, 16, 16, generator=torch.Generator().manual_seed(0))
    state: dict[str, torch.Tensor] = {}
    out = run_step(lambda x, s: torch.zeros_like(x), x, sigmas, 0, "lcm", SEED, state, ms, dict(choice.options))
    raw = torch.randn(x.shape, generator=torch.Generator().manual_seed(SEED + 1))
    bound = 0.5 * raw.std()
    assert out.abs().max() <= bound + 1e-6
    assert torch.equal(out, raw.clamp(-bound, bound))


def test_negative_settings_are_refused():
    with pytest.raises(ValueError, match="noise_clip_std"):
        SamplerLCM().get_sampler(1.0, 1.0, -1.0)
