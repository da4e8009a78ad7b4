"""Each patch inside the network or around the prediction (FreeU, FreeU_V2, PatchModelAddDownscale, PAG, the
attention multipliers, HyperTile, ToMe, SAG, a hypernetwork, LazyCache on the demo SD1 model; skip-layer
guidance on the demo Flux model) runs end to end, changes the image, and gives the in-process image on one
executor: the patch travels as data on the MODEL (or CLIP) and is applied on the executor, hooks inside the
denoise steps only, weight scales where the weights load, LazyCache's cache as step state."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.e2e.test_samplers_on_executors import BASE_PROMPT, REPO, differing_cases, render_in_process, render_on_server
from tests.nodes.test_network_patches import tiny_hypernetwork

DOWNSCALE = {
    "downscale_factor": 2.0,
    "start_percent": 0.0,
    "end_percent": 0.6,
    "downscale_method": "bicubic",
    "upscale_method": "bislerp",
}
PATCHES: dict[str, tuple[str, dict]] = {
    "freeu": ("FreeU", {"b1": 1.1, "b2": 1.2, "s1": 0.9, "s2": 0.2}),
    "freeu_v2": ("FreeU_V2", {"b1": 1.3, "b2": 1.4, "s1": 0.9, "s2": 0.2}),
    "deep_shrink_after_skip": (
        "PatchModelAddDownscale",
        {"block_number": 3, "downscale_after_skip": True, **DOWNSCALE},
    ),
    "deep_shrink_before_skip": (
        "PatchModelAddDownscale",
        {"block_number": 1, "downscale_after_skip": False, **DOWNSCALE},
    ),
    "pag": ("PerturbedAttentionGuidance", {"scale": 3.0}),
    "self_attention_multiply": ("UNetSelfAttentionMultiply", {"q": 1.5, "k": 1.2, "v": 0.8, "out": 1.1}),
    "cross_attention_multiply": ("UNetCrossAttentionMultiply", {"q": 1.0, "k": 1.3, "v": 1.5, "out": 1.0}),
    "temporal_attention_multiply": (
        "UNetTemporalAttentionMultiply",
        {"self_structural": 1.4, "self_temporal": 1.0, "cross_structural": 0.7, "cross_temporal": 1.0},
    ),
    "clip_attention_multiply": ("CLIPAttentionMultiply", {"q": 1.2, "k": 1.1, "v": 0.9, "out": 1.3}),
    "hypertile": ("HyperTile", {"tile_size": 32, "swap_size": 2, "max_depth": 1, "scale_depth": False}),
    "tome": ("TomePatchModel", {"ratio": 0.5}),
    "sag": ("SelfAttentionGuidance", {"scale": 0.5, "blur_sigma": 2.0}),
    "hypernetwork": ("HypernetworkLoader", {"hypernetwork_name": "e2e-tiny.pt", "strength": 1.0}),
    # A threshold that makes it skip model calls (the image changes only then); its cache is step state.
    "lazycache": ("LazyCache", {"reuse_threshold": 1.0, "start_percent": 0.0, "end_percent": 1.0, "verbose": False}),
}
CLIP_PATCHES = {"CLIPAttentionMultiply"}
FLUX_PROMPT = json.loads((REPO / "workflows_json" / "flux.json").read_text())
SKIPS = {"double_layers": "0", "single_layers": "1", "start_percent": 0.0}
# Flux (DiT) cases: (node, inputs, cfg).
FLUX_PATCHES: dict[str, tuple[str, dict, float]] = {
    "flux_slg": ("SkipLayerGuidanceDiT", {**SKIPS, "scale": 3.0, "end_percent": 0.8, "rescaling_scale": 0.5}, 1.0),
    "flux_slg_simple": ("SkipLayerGuidanceDiTSimple", {**SKIPS, "end_percent": 1.0}, 2.0),
}


def prompt_for(case: str | None) -> dict:
    prompt = json.loads(json.dumps(BASE_PROMPT))
    prompt["3"]["inputs"].update(steps=4, sampler_name="euler", scheduler="normal")
    prompt["5"]["inputs"].update(width=64, height=64)
    prompt["9"]["inputs"]["filename_prefix"] = f"netpatch_{case or 'none'}"
    if case is not None:
        class_type, inputs = PATCHES[case]
        if class_type in CLIP_PATCHES:
            prompt["20"] = {"class_type": class_type, "inputs": {"clip": ["4", 1], **inputs}}
            prompt["6"]["inputs"]["clip"] = prompt["7"]["inputs"]["clip"] = ["20", 0]
        else:
            prompt["20"] = {"class_type": class_type, "inputs": {"model": ["4", 0], **inputs}}
            prompt["3"]["inputs"]["model"] = ["20", 0]
    return prompt


def flux_prompt_for(case: str | None, cfg: float = 1.0) -> dict:
    prompt = json.loads(json.dumps(FLUX_PROMPT))
    prompt["3"]["inputs"].update(steps=4, sampler_name="euler", cfg=cfg)
    prompt["5"]["inputs"].update(width=64, height=64)
    prompt["9"]["inputs"]["filename_prefix"] = f"netpatch_{case or 'flux_none'}_{cfg}"
    if case is not None:
        class_type, inputs, _ = FLUX_PATCHES[case]
        prompt["20"] = {"class_type": class_type, "inputs": {"model": ["10", 0], **inputs}}
        prompt["3"]["inputs"]["model"] = ["20", 0]
    return prompt


def prompts() -> dict[str, dict]:
    flux = {case: flux_prompt_for(case, cfg) for case, (_, _, cfg) in FLUX_PATCHES.items()}
    flux_plain = {f"flux_none_{cfg}": flux_prompt_for(None, cfg) for cfg in {c for _, _, c in FLUX_PATCHES.values()}}
    return {"none": prompt_for(None), **{case: prompt_for(case) for case in PATCHES}, **flux, **flux_plain}


@pytest.fixture(scope="module", autouse=True)
def hypernetwork_file(demo_workspace):
    folder = demo_workspace.root / "models" / "hypernetworks"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "e2e-tiny.pt"
    torch.save(tiny_hypernetwork("relu", True, 0), path)
    yield path
    path.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def in_process_images(demo_workspace) -> dict[str, np.ndarray]:
    return render_in_process(demo_workspace, prompts())


def test_every_network_patch_changes_the_image(in_process_images):
    unpatched = in_process_images["none"]
    same = [case for case in PATCHES if np.array_equal(in_process_images[case], unpatched)]
    same += [
        case
        for case, (_, _, cfg) in FLUX_PATCHES.items()
        if np.array_equal(in_process_images[case], in_process_images[f"flux_none_{cfg}"])
    ]
    assert not same, f"these patches left the image unchanged: {same}"


def test_network_patched_models_on_one_executor_give_the_in_process_image(serve, in_process_images):
    base = serve("--executors", "1", "--executor-threads", "1")
    differing = differing_cases(render_on_server(base, prompts()), in_process_images)
    assert not differing, f"images differ from the in-process run (values differing per case): {differing}"
