"""WanAnimate2ToVideo's and WanAnimate2Cache's outputs and refusals (the newest ComfyUI's nodes_wan); what they
compute against ComfyUI is checked in tests/e2e/test_wan_animate2_workflow.py."""

from __future__ import annotations

import asyncio

import pytest
import torch

from nodes.library.wan_animate2 import POSE_CACHE_FILLED, PoseCacheWrapper, WanAnimate2Cache, WanAnimate2ToVideo
from nodes.loaders import make_ref
from nodes.modelfns.model_options import sampler_patches
from nodes.modelfns.network_patches import DIFFUSION_MODEL
from nodes.models.wan_animate2 import pose_cache_read
from nodes.models.wan_demo import FILES

COND = [[torch.zeros(1, 512, 32), {}]]
POSE_COND = [[torch.ones(1, 512, 32), {}]]


@pytest.fixture
def vae(demo_workspace):
    return make_ref("vae", "qwen_image", [demo_workspace.models_dir / FILES["vae"]])


def _run(vae, **kw):
    args = {"width": 32, "height": 32, "length": 9, "batch_size": 1, "video_frame_offset": 0, **kw}
    return asyncio.run(WanAnimate2ToVideo().execute(COND, COND, vae, **args))


def test_reference_frame_pose_latents_and_outputs(vae) -> None:
    pose = torch.rand(4, 32, 32, 3)
    pos, neg, latent, trim_latent, trim_image, offset = _run(
        vae, reference_image=torch.rand(1, 32, 32, 3), pose_video=pose, positive_pose=POSE_COND, pose_strength=0.5
    )
    assert (trim_latent, trim_image, offset) == (1, 0, 9)
    assert list(latent["samples"].shape) == [1, 16, 1 + 3, 4, 4]  # the reference frame before the 3 video latents
    for opts in (pos[0][1], neg[0][1]):  # both sides: upstream runs the pose branch outside CFG
        assert list(opts["concat_latent_image"].shape) == [1, 16, 4, 4, 4]
        assert opts["concat_mask"][:, :, :1].eq(0).all() and opts["concat_mask"][:, :, 1:].eq(1).all()
        assert list(opts["pose_video_latent"].shape) == [1, 16, 3, 4, 4]  # 4 frames held to the length 9
        assert torch.equal(opts["cross_attn_pose"], POSE_COND[0][0]) and opts["pose_strength"] == 0.5
        assert "reference_strength" not in opts  # 1.0 is not set, as upstream


def test_continue_motion_and_offset(vae) -> None:
    pose = torch.rand(20, 32, 32, 3)
    pos, _, _, _, trim_image, offset = _run(
        vae, pose_video=pose, continue_motion=torch.rand(3, 32, 32, 3), video_frame_offset=9
    )
    # the last continued frame is known; the offset steps back over it
    assert (trim_image, offset) == (1, 8 + 9)
    assert pos[0][1]["concat_mask"][:, :, :2].eq(0).all() and pos[0][1]["concat_mask"][:, :, 2:].eq(1).all()


def test_pose_window_splits_the_conds(vae) -> None:
    pos, neg, *_ = _run(vae, pose_video=torch.rand(9, 32, 32, 3), pose_start_percent=0.2, pose_end_percent=0.7)
    for side in (pos, neg):
        windows = [(o.get("start_percent"), o.get("end_percent"), "pose_video_latent" in o) for _, o in side]
        assert windows == [(0.2, 0.7, True), (0.0, 0.2, False), (0.7, 1.0, False)]


def test_bad_inputs_are_refused_by_name(vae) -> None:
    with pytest.raises(ValueError, match="pose_start_percent .* must not be greater than pose_end_percent"):
        _run(vae, pose_start_percent=0.8, pose_end_percent=0.2)
    with pytest.raises(ValueError, match="pose_video has 4 frames but video_frame_offset is 4"):
        _run(vae, pose_video=torch.rand(4, 32, 32, 3), video_frame_offset=4)
    with pytest.raises(ValueError, match="positive_pose"):
        _run(vae, positive_pose="not a conditioning")


def test_cache_passes_default_through_and_wraps_the_quantized_ones(demo_workspace) -> None:
    model = make_ref("diffusion_model", "wan21", [demo_workspace.models_dir / FILES["animate2"]])
    assert WanAnimate2Cache().execute(model, "cpu", "default") == (model,)
    for dtype in ("int8", "int4"):
        (cached,) = WanAnimate2Cache().execute(model, "gpu", dtype)
        assert sampler_patches(cached)[DIFFUSION_MODEL] == PoseCacheWrapper(dtype)
    with pytest.raises(ValueError, match="WanAnimate2Cache dtype: 'fp8' is not one of default, int8, int4"):
        WanAnimate2Cache().execute(model, "cpu", "fp8")


def test_the_first_pass_with_the_pose_fills_the_cache_the_later_ones_read_it() -> None:
    seen: list[str | None] = []

    def forward(x: torch.Tensor, pose: bool = True) -> torch.Tensor:
        read = pose_cache_read()
        seen.append(read.dtype)
        read.used = pose  # what the network sets when it runs the pose branch
        return x

    wrapper, state, x = PoseCacheWrapper("int8"), {}, torch.zeros(1)
    wrapper(lambda x: forward(x, pose=False), x, x, ["a"], state, {})  # a step outside the pose window
    wrapper(forward, x, x, ["a"], state, {})
    wrapper(forward, x, x, ["a"], state, {})
    assert seen == [None, None, "int8"] and POSE_CACHE_FILLED in state
    assert pose_cache_read() is None  # only inside the wrapped pass


async def test_a_quantized_cache_moves_the_sampled_frames_a_little(demo_workspace) -> None:
    """workflows_json/wan_animate2.json (3 euler steps, cfg 2) in-process with its WanAnimate2Cache at default,
    int8 and int4: the cache's state reaches the later steps' forward passes through the sampler (the frames
    differ from default's, by little); default is the plain network (tests/e2e/test_wan_animate2_workflow.py)."""
    import json
    from pathlib import Path

    import numpy as np
    from PIL import Image

    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry

    torch.set_num_threads(1)
    registry = build_registry(demo_workspace, load_custom_nodes=False)
    shipped = json.loads((Path(__file__).resolve().parents[2] / "workflows_json" / "wan_animate2.json").read_text())
    frames = {}
    for dtype in ("default", "int8", "int4"):
        prompt = json.loads(json.dumps(shipped))
        prompt["12"]["inputs"]["dtype"] = dtype
        del prompt["18"], prompt["19"]
        prompt["20"] = {
            "class_type": "SaveImage",
            "inputs": {"images": ["17", 0], "filename_prefix": f"a2cache_{dtype}"},
        }
        paths = await run_prompt(prompt, None, registry, show_progress=False, all_outputs=True)
        frames[dtype] = np.stack([np.asarray(Image.open(p), dtype=np.int16) for p in sorted(paths)])
    for dtype in ("int8", "int4"):
        diff = np.abs(frames[dtype] - frames["default"])
        assert frames[dtype].shape == frames["default"].shape == (5, 48, 64, 3)
        assert 0 < diff.max() <= 4 and diff.mean() < 0.5, (dtype, diff.max(), diff.mean())
