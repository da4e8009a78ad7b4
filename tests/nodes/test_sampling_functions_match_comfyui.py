"""Guidance functions, table schedulers and samplers against what ComfyUI 0.10.0's own code computed on the same
fixed tensors and toy denoiser (tests/nodes/fixtures/comfyui_sampling_functions.json.xz, recorded by
scripts/record_comfyui_sampling_functions.py in ComfyUI's environment)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from cluster.refs import ModelRef
from nodes import arch
from nodes.library.differential_diffusion import DifferentialDiffusionFunction
from nodes.library.guidance import ApgFunction, FreScaFunction, LatentOperationCfgFunction, MahiroFunction, TcfgFunction
from nodes.library.latent_ops import Sharpen, TonemapReinhard
from nodes.library.model_advanced import ModelSamplingContinuousEDM
from nodes.library.noise_level_schedules import AlignYourStepsScheduler, GITSScheduler, OptimalStepsScheduler
from nodes.modelfns.model_options import latent_format, sampling_config, weights_ref
from nodes.modelfns.model_patches import perp_neg
from nodes.sampling.model_sampling import model_sampling_from_config
from nodes.sampling.samplers import get_sampler, run_step
from tests.float_tolerance import ulps_of_largest
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_sampling_functions.json.xz")
GUIDANCE = FIXTURE["guidance"]
SD1 = ModelRef("diffusion_model", "sd1", ("/m/sd1.safetensors",), ("d" * 64,))


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def seeded(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def assert_close(ours: torch.Tensor, theirs: torch.Tensor, what: str, atol: float = 1e-6) -> None:
    """Within `atol`, or within 4 float32 ulps of the largest recorded value where that is more: the recording was
    made on another CPU, and e.g. an EDM schedule's sigmas up to 120 come out 1 ulp (7.6e-6) apart here."""
    diff = (ours.float() - theirs).abs().max().item() if ours.numel() else 0.0
    bound = max(atol, ulps_of_largest(theirs, 4))
    assert ours.shape == theirs.shape and diff <= bound, f"{what}: max abs diff {diff} (shape {tuple(ours.shape)})"


X, COND, UNCOND = tensor(GUIDANCE["x"]), tensor(GUIDANCE["cond"]), tensor(GUIDANCE["uncond"])


def pre_args(
    cond: torch.Tensor,
    uncond: torch.Tensor,
    scale: float,
    sigma: torch.Tensor,
    skipped: bool = False,
    state: dict | None = None,
) -> dict:
    return {
        "conds": [[{}], None if skipped else [{}]],
        "conds_out": [cond, uncond],
        "cond_scale": scale,
        "timestep": sigma,
        "input": X,
        "sigma": sigma,
        "model": None,
        "model_options": {},
        "sampler_state": {} if state is None else state,
    }


@pytest.mark.parametrize(
    "case", GUIDANCE["apg"], ids=lambda c: f"eta{c['eta']}_norm{c['norm_threshold']}_m{c['momentum']}"
)
def test_apg_matches_comfyui_over_steps(case):
    fn, state = ApgFunction(case["eta"], case["norm_threshold"], case["momentum"]), {}
    for step, (sigma, expected) in enumerate(zip((14.0, 7.0, 3.0, 9.0, 1.0), case["outs"])):
        c, u = COND * (1 + 0.1 * step), UNCOND - 0.05 * step
        out = fn(pre_args(c, u, 5.5, torch.tensor([sigma, sigma]), state=state))[0]
        assert_close(out, tensor(expected), f"step {step}", atol=2e-6)


def test_mahiro_matches_comfyui():
    denoised = UNCOND + (COND - UNCOND) * 4.0
    out = MahiroFunction()({"cond_scale": 4.0, "cond_denoised": COND, "uncond_denoised": UNCOND, "denoised": denoised})
    assert_close(out, tensor(GUIDANCE["mahiro"]), "mahiro", atol=2e-6)


def test_tcfg_matches_comfyui_and_leaves_a_skipped_negative_alone():
    sigma = torch.tensor([3.0, 3.0])
    for ours, theirs in zip(TcfgFunction()(pre_args(COND, UNCOND, 6.0, sigma)), GUIDANCE["tcfg"]):
        assert_close(ours, tensor(theirs), "tcfg", atol=1e-5)
    zeros = torch.zeros_like(COND)
    for ours, theirs in zip(TcfgFunction()(pre_args(COND, zeros, 1.0, sigma, skipped=True)), GUIDANCE["tcfg_skipped"]):
        assert torch.equal(ours, tensor(theirs))


@pytest.mark.parametrize("case", GUIDANCE["fresca"], ids=lambda c: str(c["params"]))
def test_fresca_matches_comfyui(case):
    out = FreScaFunction(*case["params"])(pre_args(COND, UNCOND, 6.0, torch.tensor([3.0, 3.0])))[0]
    assert_close(out, tensor(case["out"]), "fresca", atol=2e-6)


@pytest.mark.parametrize("case", GUIDANCE["latent_operation_cfg"], ids=lambda c: c["operation"])
def test_latent_operation_cfg_matches_comfyui(case):
    operation = {"LatentOperationTonemapReinhard": TonemapReinhard, "LatentOperationSharpen": Sharpen}[
        case["operation"]
    ](*case["params"])
    out = LatentOperationCfgFunction(operation)(pre_args(COND.clone(), UNCOND.clone(), 6.0, torch.tensor([3.0])))[0]
    assert_close(out, tensor(case["out"]), case["operation"], atol=2e-6)


@pytest.mark.parametrize("case", GUIDANCE["perp_neg"], ids=lambda c: f"neg{c['neg_scale']}_cfg{c['cfg']}")
def test_perp_neg_matches_comfyui(case):
    out = perp_neg(COND, UNCOND, tensor(GUIDANCE["empty"]), case["neg_scale"], case["cfg"])
    assert_close(out, tensor(case["out"]), "perp_neg", atol=2e-6)


@pytest.mark.parametrize("index", range(len(GUIDANCE["differential_diffusion"])))
def test_differential_diffusion_mask_matches_comfyui(index):
    case = GUIDANCE["differential_diffusion"][index]
    ms = model_sampling_from_config({"kind": "discrete", "beta_schedule": "linear"})
    options = {
        "model": SimpleNamespace(inner_model=SimpleNamespace(model_sampling=ms)),
        "sigmas": torch.tensor(case["sigmas"]),
    }
    fn, mask = DifferentialDiffusionFunction(case["strength"]), tensor(GUIDANCE["mask"])
    for sigma, expected in zip(case["sigmas"][:-1], case["outs"]):
        assert_close(fn(torch.tensor([sigma, sigma]), mask, options), tensor(expected), f"sigma {sigma}")


NODES = {
    "AlignYourStepsScheduler": AlignYourStepsScheduler,
    "GITSScheduler": GITSScheduler,
    "OptimalStepsScheduler": OptimalStepsScheduler,
}


@pytest.mark.parametrize("case", FIXTURE["schedulers"], ids=lambda c: f"{c['node']}{c['inputs']}")
def test_table_schedulers_match_comfyui_exactly(case):
    (sigmas,) = NODES[case["node"]]().get_sigmas(*case["inputs"])
    assert sigmas.dtype == torch.float32 and sigmas.tolist() == case["sigmas"]


class ToyGuided:
    """The recording's toy denoiser: two fixed smooth sides combined by CFG; it keeps the negative side's
    prediction as the cluster's guided denoiser does for the CFG++ samplers."""

    def __init__(self, cfg: float) -> None:
        self.cfg, self.uncond_denoised = cfg, None

    def __call__(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        s = sigma.reshape(-1, 1, 1, 1)
        cond = 0.8 * x / (1 + s) + 0.1 * torch.tanh(x)
        uncond = 0.6 * x / (1 + s * s) ** 0.5 - 0.05
        self.uncond_denoised = uncond
        return uncond + (cond - uncond) * self.cfg


SAMPLING = {"ve": {"kind": "discrete", "beta_schedule": "linear"}, "flow": {"kind": "flow", "shift": 3.0}}
SAMPLING.update(ve5=SAMPLING["ve"], ve7=SAMPLING["ve"])


@pytest.mark.parametrize(
    "case", FIXTURE["samplers"], ids=lambda c: f"{c['kind']}-{c['sampler']}-{c['options']}-cfg{c['cfg']}"
)
def test_samplers_match_comfyui_on_a_toy_denoiser(case):
    ms = model_sampling_from_config(SAMPLING[case["kind"]])
    sigmas, x = tensor(case["sigmas"]), tensor(case["x"])
    model, state = ToyGuided(case["cfg"]), {}
    # What the denoise step hands over (nodes.modelfns.denoise.DenoiseStep.execute).
    sampler = get_sampler(case["sampler"])
    reads = ms.is_const or sampler.reads_model_sampling
    i = 0
    while not sampler.finished(i, sigmas, state):
        x = run_step(
            model,
            x,
            sigmas,
            i,
            case["sampler"],
            123,
            state,
            model_sampling=ms if reads else None,
            options=case["options"] or None,
        )
        i += 1
    assert_close(state["denoised"], tensor(case["last_denoised"]), "last denoised", atol=1e-5)
    assert_close(x, tensor(case["out"]), "output", atol=1e-5)


@pytest.mark.parametrize(
    "case", FIXTURE["model_sampling_continuous_edm"], ids=lambda c: f"{c['sampling']}-{c['sigma_max']}-{c['sigma_min']}"
)
def test_model_sampling_continuous_edm_matches_comfyui(case):
    model = ModelSamplingContinuousEDM().patch(SD1, case["sampling"], case["sigma_max"], case["sigma_min"])[0]
    ms, fmt = model_sampling_from_config(sampling_config(model)), latent_format(model)
    x, out, noise = seeded(11, 2, 4, 3, 3), seeded(12, 2, 4, 3, 3), seeded(13, 2, 4, 3, 3)
    sigma = torch.tensor([7.5, 0.3])
    assert_close(ms.sigmas, tensor(case["sigmas"]), "sigmas")
    assert_close(ms.timestep(sigma), tensor(case["timestep"]), "timestep")
    assert [float(ms.sigma(t)) for t in ms.timestep(sigma)] == pytest.approx(case["sigma_of"], rel=1e-6)
    assert [ms.percent_to_sigma(p) for p in (0.0, 0.2, 0.5, 0.9, 1.0)] == pytest.approx(
        case["percent_to_sigma"], rel=1e-6
    )
    assert_close(ms.calculate_input(sigma, x), tensor(case["input"]), "calculate_input")
    assert_close(ms.calculate_denoised(sigma, out, x), tensor(case["denoised"]), "calculate_denoised")
    assert_close(ms.noise_scaling(sigma, noise, x), tensor(case["noise_scaling"]), "noise_scaling")
    assert_close(
        ms.noise_scaling(sigma, noise, x, max_denoise=True),
        tensor(case["noise_scaling_max"]),
        "noise_scaling at the top",
    )
    assert_close(ms.inverse_noise_scaling(sigma, x), tensor(case["inverse_noise_scaling"]), "inverse_noise_scaling")
    if "process_in" in case:
        assert_close(fmt.process_in(x), tensor(case["process_in"]), "latent format in")
        assert_close(fmt.process_out(x), tensor(case["process_out"]), "latent format out", atol=1e-5)
    else:
        assert fmt is arch.latent_format("sd1")
    assert weights_ref(model) == SD1  # a sampling patch: the weights stay the plain model's
