"""EasyCache and the video CFG guidance functions against ComfyUI 0.3.64 (a125cd84): the fixture
tests/nodes/fixtures/comfyui_easycache_video_cfg.json.xz holds what ComfyUI's own node code computed on fixed
tensors (scripts/record_comfyui_easycache_video_cfg.py, run in ComfyUI's environment): the cfg functions of
VideoLinearCFGGuidance / VideoTriangleCFGGuidance on seeded noise estimates, and EasyCache's wrappers over an
Euler loop of a toy network, with its model calls and skipped steps."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nodes.library.easycache import EC_SKIPPED, EasyCache
from nodes.library.video_cfg import VideoLinearCFGGuidance, VideoTriangleCFGGuidance
from nodes.modelfns.model_options import sampler_patches, weights_ref
from nodes.modelfns.network_patches import DIFFUSION_MODEL, wrap_forward
from tests.nodes.test_network_patches import sd1_ref, tensor
from tests.recorded_tensors import load_json

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_easycache_video_cfg.json.xz")
VIDEO = {"VideoLinearCFGGuidance": VideoLinearCFGGuidance, "VideoTriangleCFGGuidance": VideoTriangleCFGGuidance}
KEYS = {0: "positive.0", 1: "negative.0"}


@pytest.fixture(scope="module")
def sd1(demo_workspace):
    return sd1_ref(demo_workspace)


@pytest.mark.parametrize(
    "case", FIXTURE["video_cfg"], ids=lambda c: f"{c['node']}-{c['min_cfg']}-{c['cond_scale']}-{c['cond']['shape'][0]}"
)
def test_video_cfg_functions_match_comfyui(sd1, case):
    model = VIDEO[case["node"]]().patch(sd1, case["min_cfg"])[0]
    fn = sampler_patches(model)["sampler_cfg_function"]
    assert weights_ref(model) == sd1
    out = fn({"cond": tensor(case["cond"]), "uncond": tensor(case["uncond"]), "cond_scale": case["cond_scale"]})
    assert torch.allclose(out, tensor(case["out"]), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("case", FIXTURE["easycache"], ids=lambda c: c["case"])
def test_easycache_matches_comfyui(sd1, case):
    """The same loop as the recording, with our batch order: a pass's conds in ComfyUI's order reversed."""
    model = EasyCache().patch(sd1, case["reuse_threshold"], case["start_percent"], case["end_percent"], False)[0]
    patches = sampler_patches(model)
    assert DIFFUSION_MODEL in patches and weights_ref(model) == sd1
    sigmas, x, state, calls = case["sigmas"], tensor(case["x0"]), {}, []
    batch, offsets = case["batch"], case["offsets"]
    for i in range(len(sigmas) - 1):
        state = {k: v.clone() for k, v in state.items()}  # as it travels between steps
        sigma = torch.tensor([sigmas[i]])
        xc = x / (sigmas[i] ** 2 + 1.0) ** 0.5
        eps, evaluation = {}, {}
        for comfy_sides in case["passes"]:
            sides = comfy_sides[::-1]

            def forward(xb, sides=sides):
                calls.append([i, sides[::-1]])
                return torch.cat([c * 0.8 + 0.05 * sigmas[i] + offsets[s] for c, s in zip(xb.chunk(len(sides)), sides)])

            out = wrap_forward(
                patches, forward, torch.cat([xc] * len(sides)), sigma, [KEYS[s] for s in sides], state, evaluation
            )
            for k, s in enumerate(sides):
                eps[s] = out[k * batch : (k + 1) * batch]
        guided = eps[1] + (eps[0] - eps[1]) * case["cfg"] if len(eps) == 2 else eps[0]
        denoised = x - guided * sigmas[i]
        assert torch.allclose(denoised, tensor(case["denoised"][i]), atol=1e-5, rtol=1e-5), i
        x = denoised + (x - denoised) * (sigmas[i + 1] / sigmas[i])
    assert calls == case["model_calls"]
    assert int(state.get(EC_SKIPPED, torch.tensor(0))) == case["skipped"]
