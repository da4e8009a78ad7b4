"""comfy.samplers, comfy.sampler_helpers and nodes_custom_sampler's NOISE classes as packs use them: sampler
objects and NOISE values our SamplerCustomAdvanced takes (same image as its own nodes give), KSAMPLER.sample
in-process with ComfyUI's numbers, the conditioning helpers, and clear errors for what needs ComfyUI's
BaseModel."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from comfy_bridge.compat.comfy import sampler_helpers, samplers
from comfy_bridge.compat.comfy.k_diffusion import sampling as k
from comfy_bridge.compat.comfy_extras._noise import Noise_EmptyNoise, Noise_RandomNoise
from comfy_bridge.packs.origin import UnsupportedFeature
from nodes.ksampler import NoiseChoice, SamplerChoice
from nodes.sampling.model_sampling import model_sampling_from_config
from nodes.sampling.schedules import calculate_sigmas
from tests.recorded_tensors import load_json

from .conftest import output, run_prompt
from .test_surface_k_diffusion import FIXTURE, ToyGuided, tensor

CKPT = "sd1-tiny.safetensors"
EPS = model_sampling_from_config({"kind": "discrete", "prediction": "eps"})


def test_sampler_objects_are_samplers_our_nodes_take():
    euler = samplers.sampler_object("euler_ancestral")
    assert isinstance(euler, SamplerChoice) and isinstance(euler, samplers.KSAMPLER)
    assert euler.name == "euler_ancestral" and euler.sampler_function is k.sample_euler_ancestral
    sde = samplers.ksampler("dpmpp_sde", {"eta": 0.5, "s_noise": 0.9, "r": 0.4})
    assert isinstance(sde, SamplerChoice) and dict(sde.options) == sde.extra_options == {
        "eta": 0.5,
        "s_noise": 0.9,
        "r": 0.4,
    }
    # options our sampler has no setting for: a plain KSAMPLER of the function, which runs only in-process
    assert not isinstance(samplers.ksampler("euler", {"s_churn": 0.3}), SamplerChoice)
    assert "ddim" in samplers.SAMPLER_NAMES and "ddim" not in samplers.KSAMPLER_NAMES
    with pytest.raises(ValueError, match="unknown sampler"):
        samplers.sampler_object("no_such_sampler")


def test_ksampler_sample_runs_in_process_with_comfyui_numbers():
    ve = FIXTURE["samplers"]["ve"]
    euler = next(r for r in ve["runs"] if r["sampler"] == "euler" and not r["options"])
    wrap = ToyGuided(EPS)
    x0 = torch.randn(2, 4, 4, 4, generator=torch.Generator().manual_seed(7))  # the recording's noise
    seen = []
    out = samplers.sampler_object("euler").sample(
        wrap,
        tensor(ve["sigmas"]),
        {"seed": 123, "model_options": {}},
        lambda *a: seen.append(a),
        x0,
        torch.zeros_like(x0),
    )
    torch.testing.assert_close(out, tensor(euler["out"]), atol=2e-5, rtol=1e-5)
    assert [a[0] for a in seen] == list(range(6)) and seen[0][3] == 6


def test_a_custom_ksampler_function_gets_its_options_and_the_mask_keeps_the_latent():
    calls = {}

    def pack_sampler(model, x, sigmas, extra_args=None, callback=None, disable=None, strength=1.0):
        calls["strength"] = strength
        return k.sample_euler(model, x, sigmas, extra_args=extra_args, callback=callback, disable=disable)

    sigmas = calculate_sigmas(EPS, "karras", 4)
    noise, latent = torch.randn(1, 4, 4, 4), torch.full((1, 4, 4, 4), 0.3)
    out = samplers.KSAMPLER(pack_sampler, {"strength": 0.5}).sample(
        ToyGuided(EPS), sigmas, {"seed": 1}, None, noise, latent, denoise_mask=torch.zeros(1, 1, 4, 4)
    )
    assert calls == {"strength": 0.5}
    torch.testing.assert_close(out, latent)


def test_what_needs_comfyui_models_raises_clearly():
    with pytest.raises(UnsupportedFeature, match="sampling_function"):
        samplers.sampling_function(None, torch.zeros(1), torch.zeros(1), [], [], 7.0)
    with pytest.raises(UnsupportedFeature, match="calc_cond_batch"):
        samplers.calc_cond_batch(None, [], torch.zeros(1), torch.zeros(1), {})
    with pytest.raises(UnsupportedFeature, match="KSAMPLER.sample"):
        samplers.sampler_object("euler").sample(
            SimpleNamespace(inner_model=object()), torch.ones(2), {}, None, torch.zeros(1)
        )
    with pytest.raises(UnsupportedFeature, match="prepare_sampling"):
        sampler_helpers.prepare_sampling(None, (1, 4, 8, 8), {})


def test_schedulers_cfg_function_and_condition_helpers():
    for name, fn in (
        ("simple", samplers.simple_scheduler),
        ("normal", samplers.normal_scheduler),
        ("beta", samplers.beta_scheduler),
        ("ddim_uniform", samplers.ddim_scheduler),
    ):
        torch.testing.assert_close(fn(EPS, 7), samplers.calculate_sigmas(EPS, name, 7))
    x, cond, uncond = torch.ones(1, 2), torch.full((1, 2), 0.5), torch.zeros(1, 2)
    halved = samplers.cfg_function(
        None,
        cond,
        uncond,
        4.0,
        x,
        torch.ones(1),
        {"sampler_cfg_function": lambda a: a["uncond"] + (a["cond"] - a["uncond"]) * a["cond_scale"] / 2},
    )
    torch.testing.assert_close(halved, samplers.cfg_function(None, cond, uncond, 2.0, x, torch.ones(1)))
    converted = sampler_helpers.convert_cond([[torch.ones(1, 3), {"strength": 2}]])
    assert converted[0]["cross_attn"].shape == (1, 3) and converted[0]["strength"] == 2 and "uuid" in converted[0]
    cleaned = []
    control = SimpleNamespace(cleanup=lambda: cleaned.append(1))
    assert sampler_helpers.get_models_from_cond([{"control": control}, {}], "control") == [control]
    sampler_helpers.cleanup_models({"positive": [{"control": control}]}, [])
    assert cleaned == [1]


def test_noise_classes_give_comfyui_noise():
    latent = {"samples": torch.zeros(3, 4, 8, 8), "batch_index": [2, 0, 5]}
    ours = NoiseChoice(77).generate(latent, latent["samples"])
    assert torch.equal(Noise_RandomNoise(77).generate_noise(latent), ours)
    assert Noise_RandomNoise(77).seed == 77 and isinstance(Noise_RandomNoise(77), NoiseChoice)
    assert torch.equal(Noise_EmptyNoise().generate_noise(latent), torch.zeros(3, 4, 8, 8))


def _custom_prompt(noise: list, sampler: list, extra: dict) -> dict:
    return {
        "ckpt": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": CKPT}},
        "pos": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["ckpt", 1], "text": "a red bottle"}},
        "neg": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["ckpt", 1], "text": "blurry"}},
        "lat": {"class_type": "EmptyLatentImage", "inputs": {"width": 64, "height": 64, "batch_size": 1}},
        "guider": {
            "class_type": "CFGGuider",
            "inputs": {"model": ["ckpt", 0], "positive": ["pos", 0], "negative": ["neg", 0], "cfg": 6.0},
        },
        "sigmas": {
            "class_type": "BasicScheduler",
            "inputs": {"model": ["ckpt", 0], "scheduler": "karras", "steps": 3, "denoise": 1.0},
        },
        "sca": {
            "class_type": "SamplerCustomAdvanced",
            "inputs": {
                "noise": noise,
                "guider": ["guider", 0],
                "sampler": sampler,
                "sigmas": ["sigmas", 0],
                "latent_image": ["lat", 0],
            },
        },
        "dec": {"class_type": "VAEDecode", "inputs": {"samples": ["sca", 0], "vae": ["ckpt", 2]}},
        "out": {"class_type": "PreviewImage", "inputs": {"images": ["dec", 0]}},
        **extra,
    }


async def test_a_pack_noise_and_sampler_object_sample_as_our_nodes(packs_registry, fixed_threads):
    pack = _custom_prompt(
        ["pack", 0],
        ["pack", 1],
        {
            "pack": {
                "class_type": "PackNoiseAndSampler",
                "inputs": {"seed": 11, "add_noise": True, "sampler_name": "euler_ancestral"},
            }
        },
    )
    core = _custom_prompt(
        ["noise", 0],
        ["select", 0],
        {
            "noise": {"class_type": "RandomNoise", "inputs": {"noise_seed": 11}},
            "select": {"class_type": "KSamplerSelect", "inputs": {"sampler_name": "euler_ancestral"}},
        },
    )
    ran_pack, _ = await run_prompt(packs_registry, pack)
    ran_core, _ = await run_prompt(packs_registry, core)
    assert ran_pack.success, ran_pack.status_messages
    assert ran_core.success, ran_core.status_messages
    assert torch.equal(output(ran_pack, "sca")["samples"], output(ran_core, "sca")["samples"])


def _recorded_dpm_solver_cases() -> list[dict]:
    path = Path(__file__).parents[1] / "nodes" / "fixtures" / "comfyui_sampling_functions.json.xz"
    return [c for c in load_json(path)["samplers"] if c["sampler"] in ("dpm_fast", "dpm_adaptive")]


@pytest.mark.parametrize(
    "case", _recorded_dpm_solver_cases(), ids=lambda c: f"{c['kind']}-{c['sampler']}-{len(c['options'])}-{c['cfg']}"
)
def test_dpm_solver_sampler_functions_match_comfyui(case):
    """ComfyUI's ksampler(name).sampler_function for the two DPM-Solver samplers (recorded in the sampling
    fixture of tests/nodes): over the schedule, to its last non-zero sigma."""

    class Toy(ToyGuided):
        def __call__(self, x, sigma, model_options=None, seed=None, **kwargs):
            s = sigma.reshape(-1, 1, 1, 1)
            cond, uncond = 0.8 * x / (1 + s) + 0.1 * torch.tanh(x), 0.6 * x / (1 + s * s) ** 0.5 - 0.05
            return uncond + (cond - uncond) * case["cfg"]

    fn = samplers.ksampler(case["sampler"]).sampler_function
    out = fn(
        Toy(None),
        tensor(case["x"]),
        tensor(case["sigmas"]),
        extra_args={"seed": 123, "model_options": {}},
        callback=None,
        disable=True,
        **case["options"],
    )
    torch.testing.assert_close(out, tensor(case["out"]), atol=2e-5, rtol=1e-5)
