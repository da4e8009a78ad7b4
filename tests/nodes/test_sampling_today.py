"""Sampling nodes of today's ComfyUI that need no new model family: LTX-Video's scheduler, ModelSamplingLTXV and
LTXVConditioning equal upstream ComfyUI 0.10.0's outputs (tests/nodes/fixtures/comfyui_sampling_today.json,
recorded by scripts/record_comfyui_sampling_today.py)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from cluster.refs import ModelRef
from nodes.library.ltxv_sampling import LTXVConditioning, LTXVScheduler, ModelSamplingLTXV
from nodes.modelfns.model_options import sampling_config
from nodes.sampling.model_sampling import model_sampling_from_config

REPO = Path(__file__).resolve().parents[2]
FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_sampling_today.json").read_text())
SD1 = ModelRef("diffusion_model", "sd1", ("/m/sd1.safetensors",), ("d" * 64,))


def _recorder():
    spec = importlib.util.spec_from_file_location("record_sampling", REPO / "scripts" / "record_comfyui_sampling_today.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDER = _recorder()


def _latent(shape):
    return None if shape is None else {"samples": torch.zeros(shape)}


@pytest.mark.parametrize("index", range(len(RECORDER.SCHEDULER_CASES)))
def test_ltxv_scheduler_equals_comfyui_0_10(index):
    steps, hi, lo, stretch, terminal, shape = RECORDER.SCHEDULER_CASES[index]
    (sigmas,) = LTXVScheduler().execute(steps, hi, lo, stretch, terminal, _latent(shape))
    expected = torch.tensor(FIXTURE["scheduler"][index], dtype=sigmas.dtype)
    torch.testing.assert_close(sigmas, expected, atol=1e-6, rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize("index", range(len(RECORDER.SAMPLING_CASES)))
def test_model_sampling_ltxv_equals_comfyui_0_10(index):
    hi, lo, shape = RECORDER.SAMPLING_CASES[index]
    (model,) = ModelSamplingLTXV().execute(SD1, hi, lo, _latent(shape))
    ms = model_sampling_from_config(sampling_config(model))
    want = FIXTURE["sampling"][index]
    assert ms.is_const
    assert [float(ms.percent_to_sigma(p)) for p in RECORDER.PERCENTS] == pytest.approx(want["percent_to_sigma"], abs=1e-6)
    assert float(ms.sigma_min) == pytest.approx(want["sigma_min"], rel=1e-5)
    assert float(ms.sigma_max) == pytest.approx(want["sigma_max"], rel=1e-6)


def test_ltxv_conditioning_sets_the_frame_rate_on_both_sides():
    positive, negative = [[torch.ones(1, 2, 3), {"a": 1}]], [[torch.zeros(1, 2, 3), {}]]
    pos, neg = LTXVConditioning().execute(positive, negative, 24.5)
    assert pos[0][1] == FIXTURE["conditioning"]["positive"] and neg[0][1] == FIXTURE["conditioning"]["negative"]
    assert positive[0][1] == {"a": 1}, "the input conditioning is not changed"


def test_bad_latent_is_named():
    with pytest.raises(TypeError, match="latent"):
        LTXVScheduler().execute(4, 2.05, 0.95, True, 0.1, {"samples": "x"})
