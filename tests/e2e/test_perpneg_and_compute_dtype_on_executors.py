"""PerpNeg (the deprecated MODEL patch) and ModelComputeDtype end to end on the demo SD1 model.

PerpNeg under KSampler gives PerpNegGuider's image with the same prompts and scales: ComfyUI's patch computes
the same Perp-Neg formula on the same three predictions (its CFG function evaluates the empty prompt itself).
ModelComputeDtype fp32 / default give the unpatched image bit for bit (the demo weights are float32); bf16
(and fp16) give a close, different one. Both patches travel as data on the MODEL and give the in-process
images on two executors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.e2e.test_samplers_on_executors import BASE_PROMPT, differing_cases, render_in_process, render_on_server

SEED = BASE_PROMPT["3"]["inputs"]["seed"]
# Largest difference (0..255 image values) of the reduced-precision images from the float32 one, measured on
# the demo model (bf16 11, fp16 1, on 64% and 13% of the values); the bounds leave headroom for other CPUs' kernels.
CLOSE = {"bf16": 20, "fp16": 4}


def _base(case: str) -> dict:
    prompt = json.loads(json.dumps(BASE_PROMPT))
    prompt["3"]["inputs"].update(steps=4, sampler_name="euler", scheduler="normal")
    prompt["5"]["inputs"].update(width=64, height=64)
    prompt["9"]["inputs"]["filename_prefix"] = f"pn_dtype_{case}"
    prompt["21"] = {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": ""}}
    return prompt


def _patched(case: str, class_type: str, inputs: dict) -> dict:
    prompt = _base(case)
    prompt["20"] = {"class_type": class_type, "inputs": {"model": ["4", 0], **inputs}}
    prompt["3"]["inputs"]["model"] = ["20", 0]
    return prompt


def _guider(case: str, neg_scale: float) -> dict:
    """Node 3 a SamplerCustomAdvanced with PerpNegGuider, sampling as KSampler's euler / normal does."""
    prompt = _base(case)
    ks = prompt["3"]["inputs"]
    prompt["22"] = {"class_type": "RandomNoise", "inputs": {"noise_seed": SEED}}
    prompt["23"] = {
        "class_type": "PerpNegGuider",
        "inputs": {
            "model": ["4", 0],
            "positive": ["6", 0],
            "negative": ["7", 0],
            "empty_conditioning": ["21", 0],
            "cfg": ks["cfg"],
            "neg_scale": neg_scale,
        },
    }
    prompt["24"] = {"class_type": "KSamplerSelect", "inputs": {"sampler_name": "euler"}}
    prompt["25"] = {
        "class_type": "BasicScheduler",
        "inputs": {"model": ["4", 0], "scheduler": "normal", "steps": ks["steps"], "denoise": 1.0},
    }
    prompt["3"] = {
        "class_type": "SamplerCustomAdvanced",
        "inputs": {
            "noise": ["22", 0],
            "guider": ["23", 0],
            "sampler": ["24", 0],
            "sigmas": ["25", 0],
            "latent_image": ["5", 0],
        },
    }
    return prompt


def prompts() -> dict[str, dict]:
    out = {"none": _base("none")}
    out.update(
        {
            f"dtype_{d}": _patched(f"dtype_{d}", "ModelComputeDtype", {"dtype": d})
            for d in ("default", "fp32", "bf16", "fp16")
        }
    )
    for neg_scale in (1.0, 2.5):
        out[f"perp_neg_{neg_scale}"] = _patched(
            f"perp_neg_{neg_scale}", "PerpNeg", {"empty_conditioning": ["21", 0], "neg_scale": neg_scale}
        )
        out[f"perp_neg_guider_{neg_scale}"] = _guider(f"perp_neg_guider_{neg_scale}", neg_scale)
    return out


@pytest.fixture(scope="module")
def in_process_images(demo_workspace) -> dict[str, np.ndarray]:
    return render_in_process(demo_workspace, prompts())


def test_fp32_and_default_compute_give_the_unpatched_image(in_process_images):
    for case in ("dtype_default", "dtype_fp32"):
        assert np.array_equal(in_process_images[case], in_process_images["none"]), case


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_reduced_precision_compute_gives_a_close_different_image(in_process_images, dtype):
    image, plain = (in_process_images[c].astype(np.int16) for c in (f"dtype_{dtype}", "none"))
    assert not np.array_equal(image, plain)
    assert int(np.abs(image - plain).max()) <= CLOSE[dtype]


@pytest.mark.parametrize("neg_scale", [1.0, 2.5])
def test_perp_neg_patch_gives_perp_neg_guiders_image(in_process_images, neg_scale):
    image = in_process_images[f"perp_neg_{neg_scale}"]
    assert not np.array_equal(image, in_process_images["none"])
    assert np.array_equal(image, in_process_images[f"perp_neg_guider_{neg_scale}"])


def test_on_two_executors_give_the_in_process_images(serve, in_process_images):
    base = serve("--executors", "2", "--executor-threads", "1")
    differing = differing_cases(render_on_server(base, prompts()), in_process_images)
    assert not differing, f"images differ from the in-process run (values differing per case): {differing}"
