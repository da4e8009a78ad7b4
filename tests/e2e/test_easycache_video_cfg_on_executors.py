"""EasyCache and the video CFG guidance nodes end to end on the demo SD1 model, in process and on two
executors. EasyCache skips forward passes of the diffusion model (counted), which changes the image; with a
reuse_threshold of 0 it never skips and gives the plain image; its per-cond cache travels as step state.
VideoLinearCFGGuidance / VideoTriangleCFGGuidance give each sample of a batch of 3 its own guidance scale: each
sample is the same sample of a plain KSampler run at that scale (CFG on the noise estimates rather than the
denoised predictions: equal up to rounding)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.e2e.test_samplers_on_executors import BASE_PROMPT, differing_cases, render_in_process, render_on_server

CFG, MIN_CFG = 8.0, 2.0
# The scales ComfyUI's functions give a batch of 3: linear from min_cfg to cfg; triangle min_cfg, cfg, min_cfg.
SCALES = {
    "VideoLinearCFGGuidance": (MIN_CFG, (MIN_CFG + CFG) / 2, CFG),
    "VideoTriangleCFGGuidance": (MIN_CFG, CFG, MIN_CFG),
}
EASYCACHE = {"start_percent": 0.0, "end_percent": 1.0, "verbose": False}


def prompt_for(
    name: str, patch: tuple[str, dict] | None = None, cfg: float = CFG, batch: int = 1, sample: int | None = None
) -> dict:
    prompt = json.loads(json.dumps(BASE_PROMPT))
    prompt["3"]["inputs"].update(steps=6, sampler_name="euler", scheduler="normal", cfg=cfg)
    prompt["5"]["inputs"].update(width=64, height=64, batch_size=batch)
    prompt["9"]["inputs"]["filename_prefix"] = f"easycache_video_{name}"
    if patch is not None:
        class_type, inputs = patch
        prompt["20"] = {"class_type": class_type, "inputs": {"model": ["4", 0], **inputs}}
        prompt["3"]["inputs"]["model"] = ["20", 0]
    if sample is not None:  # one sample of the batch: one image per prompt
        prompt["21"] = {
            "class_type": "LatentFromBatch",
            "inputs": {"samples": ["3", 0], "batch_index": sample, "length": 1},
        }
        prompt["8"]["inputs"]["samples"] = ["21", 0]
    return prompt


def prompts() -> dict[str, dict]:
    out = {
        "none": prompt_for("none"),
        "easycache": prompt_for("easycache", ("EasyCache", {"reuse_threshold": 1.0, **EASYCACHE})),
        "easycache_zero": prompt_for("easycache_zero", ("EasyCache", {"reuse_threshold": 0.0, **EASYCACHE})),
    }
    for node in SCALES:
        for i in range(3):
            out[f"{node}/{i}"] = prompt_for(f"{node}_{i}", (node, {"min_cfg": MIN_CFG}), batch=3, sample=i)
    for scale in sorted({s for scales in SCALES.values() for s in scales}):
        for i in range(3):
            out[f"plain_{scale}/{i}"] = prompt_for(f"plain_{scale}_{i}", cfg=scale, batch=3, sample=i)
    return out


@pytest.fixture(scope="module")
def model_calls(demo_workspace) -> dict[str, int]:
    """Forward passes of the diffusion model per case, counted in process."""
    import nodes.modelfns.denoise as denoise

    calls, original = [0], denoise.apply_model

    def counting(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    counts = {}
    try:
        denoise.apply_model = counting
        for case in ("none", "easycache", "easycache_zero"):
            calls[0] = 0
            render_in_process(demo_workspace, {case: prompts()[case]})
            counts[case] = calls[0]
    finally:
        denoise.apply_model = original
    return counts


@pytest.fixture(scope="module")
def in_process_images(demo_workspace) -> dict[str, np.ndarray]:
    return render_in_process(demo_workspace, prompts())


def test_easycache_skips_forward_passes(model_calls):
    assert model_calls["none"] == 6  # cond and uncond batched: one pass per step
    assert model_calls["easycache_zero"] == 6
    assert model_calls["easycache"] < 6


def test_easycache_changes_the_image_and_a_zero_threshold_does_not(in_process_images):
    assert not np.array_equal(in_process_images["easycache"], in_process_images["none"])
    assert np.array_equal(in_process_images["easycache_zero"], in_process_images["none"])


@pytest.mark.parametrize("node", SCALES)
def test_each_sample_gets_its_own_guidance_scale(in_process_images, node):
    for i, scale in enumerate(SCALES[node]):
        got = in_process_images[f"{node}/{i}"].astype(int)
        want = in_process_images[f"plain_{scale}/{i}"].astype(int)
        assert np.abs(got - want).max() <= 1, (i, scale)
        others = [s for s in set(SCALES[node]) if s != scale]
        assert all(
            not np.array_equal(in_process_images[f"plain_{s}/{i}"], in_process_images[f"plain_{scale}/{i}"])
            for s in others
        )


def test_two_executors_give_the_in_process_images(serve, in_process_images):
    base = serve("--executors", "2", "--executor-threads", "1")
    differing = differing_cases(render_on_server(base, prompts()), in_process_images)
    assert not differing, f"images differ from the in-process run (values differing per case): {differing}"
