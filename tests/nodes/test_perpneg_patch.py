"""The deprecated PerpNeg MODEL patch against ComfyUI 0.3.64's own patch function on fixed tensors
(tests/nodes/fixtures/comfyui_perpneg_patch.json, recorded by scripts/record_comfyui_perpneg_patch.py with a
stand-in calc_cond_batch), and the MODEL values PerpNeg and ModelComputeDtype make."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from cluster.refs import ModelRef
from nodes.library.model_advanced import ModelComputeDtype
from nodes.library.perpneg import EMPTY, PerpNeg
from nodes.modelfns.model_options import DTYPE, carried_conditionings, sampler_patches, weights_ref
from nodes.modelfns.network_patches import CALC_COND
from tests.nodes.test_sampling_functions_match_comfyui import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_perpneg_patch.json").read_text())
SD1 = ModelRef("diffusion_model", "sd1", ("/m/sd1.safetensors",), ("d" * 64,))


def _perp_neg_model(context: torch.Tensor, neg_scale: float) -> ModelRef:
    return PerpNeg().patch(SD1, [[context, {}]], neg_scale)[0]


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: f"neg{c['neg_scale']}_cfg{c['cfg']}")
def test_perp_neg_cfg_function_matches_comfyui(case):
    x, cond, uncond, empty = (tensor(FIXTURE[k]) for k in ("x", "cond", "uncond", "empty"))
    fn = sampler_patches(_perp_neg_model(tensor(FIXTURE["context"]), case["neg_scale"]))["sampler_cfg_function"]
    entries = [{"key": f"{EMPTY}.0"}]
    calls = []

    def calc_cond_batch(model, conds, x_in, sigma, model_options):
        calls.append((conds, x_in, model_options))
        return [empty * (1.0 + 0.1 * float(sigma.reshape(-1)[0]))]

    sigma = torch.full((2,), case["sigma"])
    options = {CALC_COND: calc_cond_batch, EMPTY: entries}
    out = fn(
        {
            "cond": x - cond,
            "uncond": x - uncond,
            "cond_scale": case["cfg"],
            "timestep": sigma,
            "input": x,
            "sigma": sigma,
            "cond_denoised": cond,
            "uncond_denoised": uncond,
            "model": SimpleNamespace(model_sampling=None),
            "model_options": options,
        }
    )
    torch.testing.assert_close(out, tensor(case["out"]), rtol=0, atol=2e-6)
    # one evaluation of the carried empty prompt alone, at the step's input, under the step's model_options
    ((conds, x_in, model_options),) = calls
    assert case["call"]["n_conds"] == len(conds) == 1 and conds[0] is entries
    assert case["call"]["same_x"] and x_in is x and model_options is options


def test_perp_neg_model_carries_the_empty_prompt_as_a_hashable_picklable_value():
    context = torch.randn(1, 7, 8, generator=torch.Generator().manual_seed(0))
    model = _perp_neg_model(context, 1.0)
    same = _perp_neg_model(context.clone(), 1.0)
    other = _perp_neg_model(context + 1e-3, 1.0)
    assert model == same and hash(model) == hash(same) and model.key == same.key
    assert model != other and model.key != other.key
    back = pickle.loads(pickle.dumps(model))
    assert back == model and torch.equal(carried_conditionings(back)[EMPTY][0][0], context)
    assert weights_ref(model) == SD1  # the executors load (and cache) the plain weights


def test_model_compute_dtype_is_a_sampling_only_option():
    bf16 = ModelComputeDtype().patch(SD1, "bf16")[0]
    assert bf16.option(DTYPE) == "bfloat16" and weights_ref(bf16) == SD1
    assert ModelComputeDtype().patch(SD1, "fp16")[0].option(DTYPE) == "float16"
    assert ModelComputeDtype().patch(bf16, "fp32")[0].option(DTYPE) == "float32"
    assert ModelComputeDtype().patch(bf16, "default")[0] == SD1  # "default" undoes an earlier choice
    with pytest.raises(ValueError):
        ModelComputeDtype().patch(SD1, "fp8")
