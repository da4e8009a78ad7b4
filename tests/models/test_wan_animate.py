"""WanAnimateToVideo checked against ComfyUI 0.3.64 on wan-tiny's Wan 2.1 VAE and image-to-video model.

tests/models/fixtures/comfyui_wan_animate.json.xz was recorded by scripts/record_comfyui_wan_animate.py: the node's
outputs for every optional input (pose, face, background, character mask, continue_motion, a frame offset, one
past the videos' ends, none), and one evaluation of the image-to-video model on its concat."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
import torch

from nodes.arch import sampling_config
from nodes.conditioning import flatten
from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.wan_demo import FILES, build_demo_wan
from nodes.sampling.model_sampling import model_sampling_from_config
from tests.node_calls import active_workspace
from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_wan_animate.json.xz")
ATOL, RTOL = 1e-5, 1e-5


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    yield from active_workspace(tmp_path_factory.mktemp("wan-animate-ws"), build_demo_wan)


def test_files_are_the_recorded_ones(workspace) -> None:
    for part, rec in FIXTURE["files"].items():
        assert rec["path"] == FILES[part]
        assert hashlib.sha256((workspace.models_dir / FILES[part]).read_bytes()).hexdigest() == rec["sha256"], (
            f"{FILES[part]} changed: re-record {FIXTURE['recorded_by']}"
        )


def _node(ws, case: dict):
    from nodes.library.wan_animate import WanAnimateToVideo

    cond = [[tensor(FIXTURE["context"]), {}]]
    vae = make_ref("vae", "qwen_image", [ws.models_dir / FILES["vae"]])
    images = {k: tensor(v) for k, v in case["inputs"].items()}
    return asyncio.run(WanAnimateToVideo().execute(cond, cond, vae, **case["widgets"], **images))


def _close(ours: torch.Tensor, entry: dict, what: str) -> None:
    assert list(ours.shape) == entry["shape"], what
    torch.testing.assert_close(at_recorded(ours, entry), tensor(entry), atol=ATOL, rtol=RTOL, msg=what)


@pytest.mark.parametrize("name", sorted(FIXTURE["cases"]))
def test_animate_conditioning_equals_comfyuis(workspace, name: str) -> None:
    case = FIXTURE["cases"][name]
    pos, neg, latent, *ints = _node(workspace, case)
    assert list(latent["samples"].shape) == case["latent_shape"] and not latent["samples"].any()
    assert ints == case["ints"]
    opts = {k: v for k, v in pos[0][1].items() if isinstance(v, torch.Tensor)}
    assert sorted(opts) == sorted(case["positive"])
    for key, entry in case["positive"].items():
        _close(opts[key], entry, f"{name} {key}")
    negative = neg[0][1]
    assert sorted(k for k in opts if torch.equal(negative[k], opts[k])) == case["negative_same"]
    if case["negative_face"] is not None:
        _close(negative["face_video_pixels"], case["negative_face"], f"{name} negative face")


def test_one_step_on_animate_concat_equals_comfyuis(workspace) -> None:
    """The reference frame in front of the video reaches the image-to-video model as ComfyUI's concat (mask 0
    on it) and one evaluation gives ComfyUI's denoised; pose and face are read only by a Wan 2.2 Animate model."""
    step = FIXTURE["step"]
    pos, *_ = _node(workspace, FIXTURE["cases"]["everything"])
    tensors, (entry,) = flatten("positive", pos, lambda p: 1.0 - p)
    key = entry["key"]
    model = loader.load_diffusion_model(make_ref("diffusion_model", "wan21", [workspace.models_dir / FILES["i2v_21"]]))
    x, sigma = tensor(step["x"]), torch.tensor([step["sigma"]])
    concat = model.concat_image(tensors[f"{key}.concat_latent_image"], x, tensors[f"{key}.concat_mask"])
    torch.testing.assert_close(concat, tensor(step["concat"]), atol=ATOL, rtol=RTOL)
    ms = model_sampling_from_config(sampling_config("wan21"))
    cond = {"context": tensor(step["context"]), "concat": concat, "clip_fea": tensor(step["clip_fea"])}
    out = model.apply(ms.calculate_input(sigma, x), ms.timestep(sigma), cond)
    torch.testing.assert_close(ms.calculate_denoised(sigma, out, x), tensor(step["denoised"]), atol=ATOL, rtol=RTOL)


def test_a_wan22_animate_file_is_refused_by_name(tmp_path) -> None:
    """Wan 2.2 Animate's own network is not implemented: its file (Wan 2.1 i2v's blocks with a pose embedding, a
    face encoder and adapter) is refused by name rather than loaded without them."""
    from safetensors.torch import save_file

    from nodes.models.errors import ModelLoadError
    from nodes.models.wan_demo import tiny_wan_state_dicts

    sd = dict(tiny_wan_state_dicts()["i2v_21"])
    dim = sd["head.modulation"].shape[-1]
    sd["pose_patch_embedding.weight"], sd["pose_patch_embedding.bias"] = torch.zeros(dim, 16, 1, 2, 2), torch.zeros(dim)
    sd["face_adapter.fuser_blocks.0.linear1_kv.weight"] = torch.zeros(2 * dim, 32)
    path = tmp_path / "Wan2_2-Animate-14B_tiny.safetensors"
    save_file(sd, path)
    with pytest.raises(ModelLoadError, match="Wan 2.2 Animate"):
        loader.load_diffusion_model(make_ref("diffusion_model", "wan21", [path]))
