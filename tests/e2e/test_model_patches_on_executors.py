"""Each sampling patch (ModelSampling*, RescaleCFG, CFGZeroStar, CFGNorm, Epsilon Scaling) runs end to end on
the demo SD1 model, changes the image, and gives the in-process image on one executor: the patch travels as
data on the MODEL and is applied inside the executor's denoise steps."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.e2e.test_samplers_on_executors import BASE_PROMPT, differing_cases, render_in_process, render_on_server

PATCHES: dict[str, tuple[str, dict]] = {
    "discrete_v_zsnr": ("ModelSamplingDiscrete", {"sampling": "v_prediction", "zsnr": True}),
    "discrete_x0": ("ModelSamplingDiscrete", {"sampling": "x0", "zsnr": False}),
    "discrete_img_to_img": ("ModelSamplingDiscrete", {"sampling": "img_to_img", "zsnr": False}),
    "discrete_lcm": ("ModelSamplingDiscrete", {"sampling": "lcm", "zsnr": False}),
    "discrete_eps_zsnr": ("ModelSamplingDiscrete", {"sampling": "eps", "zsnr": True}),
    "sd3": ("ModelSamplingSD3", {"shift": 3.0}),
    "auraflow": ("ModelSamplingAuraFlow", {"shift": 1.73}),
    "flux": ("ModelSamplingFlux", {"max_shift": 1.15, "base_shift": 0.5, "width": 64, "height": 64}),
    "stable_cascade": ("ModelSamplingStableCascade", {"shift": 2.0}),
    "continuous_v": ("ModelSamplingContinuousV", {"sampling": "v_prediction", "sigma_max": 500.0, "sigma_min": 0.03}),
    "rescale_cfg": ("RescaleCFG", {"multiplier": 0.7}),
    "cfg_zero_star": ("CFGZeroStar", {}),
    "cfg_norm": ("CFGNorm", {"strength": 0.8}),
    "epsilon_scaling": ("Epsilon Scaling", {"scaling_factor": 1.2}),
}


def prompt_for(case: str | None) -> dict:
    prompt = json.loads(json.dumps(BASE_PROMPT))
    prompt["3"]["inputs"].update(steps=4, sampler_name="euler", scheduler="normal")
    prompt["5"]["inputs"].update(width=64, height=64)
    prompt["9"]["inputs"]["filename_prefix"] = f"patch_{case or 'none'}"
    if case is not None:
        class_type, inputs = PATCHES[case]
        prompt["20"] = {"class_type": class_type, "inputs": {"model": ["4", 0], **inputs}}
        prompt["3"]["inputs"]["model"] = ["20", 0]
    return prompt


def prompts() -> dict[str, dict]:
    return {"none": prompt_for(None), **{case: prompt_for(case) for case in PATCHES}}


@pytest.fixture(scope="module")
def in_process_images(demo_workspace) -> dict[str, np.ndarray]:
    return render_in_process(demo_workspace, prompts())


def test_every_patch_changes_the_image(in_process_images):
    unpatched = in_process_images["none"]
    same = [case for case in PATCHES if np.array_equal(in_process_images[case], unpatched)]
    assert not same, f"these patches left the image unchanged: {same}"


def test_patched_models_on_one_executor_give_the_in_process_image(serve, in_process_images):
    base = serve("--executors", "1", "--executor-threads", "1")
    differing = differing_cases(render_on_server(base, prompts()), in_process_images)
    assert not differing, f"images differ from the in-process run (values differing per case): {differing}"
