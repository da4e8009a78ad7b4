"""Model patches of today's ComfyUI: Temporal Score Rescaling's post-CFG function equals upstream ComfyUI 0.10.0's
(tests/nodes/fixtures/comfyui_today_patches.json, recorded by scripts/record_comfyui_today_patches.py), on an
epsilon / v model and on a rectified-flow one; wanBlockSwap hands the model on unchanged."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from cluster.refs import ModelRef
from nodes.library.eps import TemporalScoreRescaling
from nodes.library.nop import wanBlockSwap
from nodes.modelfns.model_options import sampler_patches
from nodes.modelfns.model_patches import post_cfg
from tests.nodes.engine_run import run_core_prompt

REPO = Path(__file__).resolve().parents[2]
FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_today_patches.json").read_text())
SD1 = ModelRef("diffusion_model", "sd1", ("/m/sd1.safetensors",), ("d" * 64,))


def _recorder():
    spec = importlib.util.spec_from_file_location(
        "record_patches", REPO / "scripts" / "record_comfyui_today_patches.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDER = _recorder()


def _tsr(k: float, tsr_sigma: float, x: torch.Tensor, denoised: torch.Tensor, sigma: torch.Tensor, flow: bool):
    patches = sampler_patches(TemporalScoreRescaling().patch(SD1, k, tsr_sigma)[0])
    model = SimpleNamespace(model_sampling=SimpleNamespace(is_const=flow))
    # the sampler's post-CFG chain, as the denoiser calls it after guidance
    return post_cfg(patches, denoised, denoised, None, 1.0, x, sigma, model, ([], []))


@pytest.mark.parametrize("index", range(len(RECORDER.TSR_CASES)))
def test_temporal_score_rescaling_equals_comfyui_0_10(index):
    k, tsr_sigma, sigma, flow = RECORDER.TSR_CASES[index]
    x = RECORDER.inputs()
    out = _tsr(k, tsr_sigma, x["x"], x["denoised"], torch.tensor([sigma]), flow)
    expected = torch.tensor(FIXTURE["tsr"][index]).reshape(out.shape)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_temporal_score_rescaling_takes_each_samples_own_sigma():
    x = RECORDER.inputs()
    xs, ds = torch.cat([x["x"], -x["x"]]), torch.cat([x["denoised"], x["x"]])
    both = _tsr(0.7, 1.0, xs, ds, torch.tensor([0.5, 0.0]), False)
    assert torch.equal(both[1:], ds[1:])  # no noise: unchanged
    torch.testing.assert_close(both[:1], _tsr(0.7, 1.0, xs[:1], ds[:1], torch.tensor([0.5]), False))
    assert not torch.allclose(both[:1], ds[:1])


def test_wan_block_swap_hands_the_model_on():
    assert wanBlockSwap().execute(SD1) == (SD1,)


def _seeds2_cases():
    return [pytest.param(c, id=f"{c['kind']}-{'-'.join(map(str, c['case']))}") for c in FIXTURE["seeds2"]]


@pytest.mark.parametrize("case", _seeds2_cases())
def test_sampler_seeds2_equals_comfyui_0_10(case):
    from nodes.library.sampler_objects import SamplerSEEDS2
    from nodes.sampling.model_sampling import model_sampling_from_config
    from nodes.sampling.samplers import get_sampler, run_step

    choice = SamplerSEEDS2().get_sampler(*case["case"])[0]
    ms = model_sampling_from_config(
        {"ve": {"kind": "discrete", "beta_schedule": "linear"}, "flow": {"kind": "flow", "shift": 3.0}}[case["kind"]]
    )
    sigmas = torch.tensor(case["sigmas"])
    x = torch.tensor(case["x"]).reshape(case["shape"])
    sampler, state, i = get_sampler(choice.name), {}, 0
    # the recording's seed: our CPU noise stream takes seed + 1 as ComfyUI 0.10.0's noise sampler does
    reads = ms.is_const or sampler.reads_model_sampling
    while not sampler.finished(i, sigmas, state):
        x = run_step(
            RECORDER.toy_guided,
            x,
            sigmas,
            i,
            choice.name,
            123,
            state,
            model_sampling=ms if reads else None,
            options=dict(choice.options),
        )
        i += 1
    torch.testing.assert_close(x, torch.tensor(case["out"]).reshape(case["shape"]), atol=1e-5, rtol=1e-5)


def test_sampler_seeds2_names_a_bad_setting():
    from nodes.library.sampler_objects import SamplerSEEDS2

    with pytest.raises(ValueError, match="phi_3"):
        SamplerSEEDS2().get_sampler("phi_3", 1.0, 1.0, 0.5)


class FakeModel:
    """A MODEL source for the engine tests (no weights are loaded: the node under test only passes it on)."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ("MODEL",)
    FUNCTION = "run"

    def run(self):
        return (SD1,)


class KeepModel:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL", {})}}

    RETURN_TYPES = ()
    FUNCTION = "run"
    OUTPUT_NODE = True

    def run(self, model):
        return {"ui": {"model": [model == SD1]}}


@pytest.mark.parametrize("backend", ["pytorch attention", "comfy kitchen attention"])
async def test_model_attention_backend_runs_any_backend_a_template_names(backend, tmp_path, caplog):
    """Templates made on a GPU name "comfy kitchen attention", which is not offered here: the prompt still validates
    and runs, with PyTorch attention and a warning, as ComfyUI does where that backend is unavailable."""
    from nodes.workspace import Workspace, activate

    activate(Workspace(tmp_path / "ws").create())
    prompt = {
        "m": {"class_type": "FakeModel", "inputs": {}},
        "a": {"class_type": "ModelAttentionBackend", "inputs": {"model": ["m", 0], "attention": backend}},
        "k": {"class_type": "KeepModel", "inputs": {"model": ["a", 0]}},
    }
    outputs = await run_core_prompt(prompt, {"FakeModel": FakeModel, "KeepModel": KeepModel})
    assert outputs["k"] == {"model": [True]}  # the same model, unchanged
    assert ("unavailable" in caplog.text) == (backend != "pytorch attention")


def test_model_attention_backend_names_a_bad_model():
    from nodes.library.model_advanced import ModelAttentionBackend

    with pytest.raises(Exception, match="(?i)model"):
        ModelAttentionBackend().patch("not a model", "pytorch attention")
