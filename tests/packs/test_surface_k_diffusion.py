"""comfy.k_diffusion.sampling: the sampler functions and helpers packs call give ComfyUI's numbers (fixture
recorded on ComfyUI 0.10.0 by scripts/record_comfyui_kdiffusion_functions.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from comfy_bridge.compat.comfy.k_diffusion import sampling as k
from comfy_bridge.packs.origin import UnsupportedFeature
from nodes.sampling.model_sampling import model_sampling_from_config

from .recorded import load, tensor

FIXTURE = load("comfyui_kdiffusion_functions.json")


class ToyGuided:
    """The recording's toy: CFG 1.7 of two smooth denoisers, honouring post-CFG functions."""

    def __init__(self, model_sampling) -> None:
        self.inner_model = SimpleNamespace(model_sampling=model_sampling)

    def __call__(self, x, sigma, model_options=None, seed=None, **kwargs):
        s = sigma.reshape(-1, 1, 1, 1)
        cond, uncond = 0.8 * x / (1 + s) + 0.1 * torch.tanh(x), 0.6 * x / (1 + s * s) ** 0.5 - 0.05
        out = uncond + (cond - uncond) * 1.7
        for fn in (model_options or {}).get("sampler_post_cfg_function", []):
            out = fn({"denoised": out, "uncond_denoised": uncond, "cond_denoised": cond, "cond_scale": 1.7})
        return out


def _model_sampling(kind: str):
    if kind == "ve":
        return model_sampling_from_config({"kind": "discrete", "prediction": "eps"})
    return model_sampling_from_config({"kind": "flow", "shift": 3.0, "multiplier": 1000})


CASES = [(kind, run) for kind, entry in FIXTURE["samplers"].items() for run in entry["runs"]]


@pytest.mark.parametrize("kind,run", CASES, ids=[f"{kd}-{r['sampler']}-{len(r['options'])}" for kd, r in CASES])
def test_sampler_function_matches_comfyui(kind, run):
    entry = FIXTURE["samplers"][kind]
    fn = getattr(k, f"sample_{run['sampler']}")
    seen = []
    out = fn(
        ToyGuided(_model_sampling(kind)),
        tensor(entry["x"]),
        tensor(entry["sigmas"]),
        extra_args={"seed": 123, "model_options": {}},
        callback=seen.append,
        disable=True,
        **run["options"],
    )
    torch.testing.assert_close(out, tensor(run["out"]), atol=2e-5, rtol=1e-5)
    assert len(seen) == run["steps"]
    torch.testing.assert_close(seen[0]["x"], tensor(run["first_x"]))
    torch.testing.assert_close(seen[-1]["denoised"], tensor(run["last_denoised"]), atol=2e-5, rtol=1e-5)


def test_helpers_match_comfyui():
    h = FIXTURE["helpers"]
    assert k.get_sigmas_karras(5, 0.03, 14.6, rho=6.0).tolist() == pytest.approx(h["karras"], rel=1e-6)
    assert k.get_sigmas_exponential(5, 0.03, 14.6).tolist() == pytest.approx(h["exponential"], rel=1e-6)
    assert k.get_sigmas_polyexponential(5, 0.03, 14.6, rho=1.5).tolist() == pytest.approx(
        h["polyexponential"], rel=1e-6
    )
    assert k.get_sigmas_vp(5).tolist() == pytest.approx(h["vp"], rel=1e-6)
    assert k.get_sigmas_laplace(5, 0.03, 14.6, mu=0.2).tolist() == pytest.approx(h["laplace"], rel=1e-6)
    down, up = k.get_ancestral_step(torch.tensor(3.0), torch.tensor(1.2), eta=0.8)
    assert [float(down), float(up)] == pytest.approx(h["ancestral_step"], rel=1e-6)
    x = torch.zeros(1, 2, 3, 3)
    torch.testing.assert_close(k.default_noise_sampler(x, seed=9)(None, None), tensor(h["default_noise"]))
    brownian = k.BrownianTreeNoiseSampler(x, torch.tensor(0.03), torch.tensor(14.6), seed=5, cpu=True)
    torch.testing.assert_close(brownian(torch.tensor(7.0), torch.tensor(2.0)), tensor(h["brownian"]))
    torch.testing.assert_close(
        k.to_d(torch.ones(1, 2), torch.tensor([2.0]), torch.zeros(1, 2)), torch.full((1, 2), 0.5)
    )


def test_a_pack_noise_sampler_is_used_and_an_unknown_setting_is_refused():
    x, sigmas = torch.ones(1, 1, 2, 2), torch.tensor([2.0, 1.0, 0.0])
    drawn = []

    def noise_sampler(sigma, sigma_next):
        drawn.append((float(sigma), float(sigma_next)))
        return torch.zeros_like(x)

    k.sample_euler_ancestral(ToyGuided(None), x, sigmas, noise_sampler=noise_sampler)
    assert drawn == [(2.0, 1.0)]
    # s_churn at ComfyUI's default changes nothing; another value is a setting our euler does not have
    k.sample_euler(ToyGuided(None), x, sigmas, s_churn=0.0, s_tmax=float("inf"))
    with pytest.raises(UnsupportedFeature, match="s_churn"):
        k.sample_euler(ToyGuided(None), x, sigmas, s_churn=0.5)


def test_dpm_adaptive_calls_back_each_step_and_sigma_helpers_need_our_model_sampling():
    seen = []
    k.sample_dpm_adaptive(ToyGuided(None), torch.randn(1, 1, 2, 2), 0.03, 14.6, callback=seen.append)
    assert len(seen) > 2 and float(seen[-1]["sigma"]) == pytest.approx(0.03)
    flow = _model_sampling("flow")
    lam = k.sigma_to_half_log_snr(torch.tensor([0.25]), flow)
    torch.testing.assert_close(k.half_log_snr_to_sigma(lam, flow), torch.tensor([0.25]))
    with pytest.raises(UnsupportedFeature, match="model_sampling"):
        k.sigma_to_half_log_snr(torch.tensor([0.25]), object())
