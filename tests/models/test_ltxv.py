"""LTX-Video 0.9 (issue 39) checked against ComfyUI 0.3.64 on ltxv-tiny (nodes/models/ltxv_demo.py): the checkpoint
is detected as ComfyUI's LTXV; LTXVImgToVideo's latent and noise mask, one evaluation of the transformer (plain and
under that noise mask: per-token timesteps) and the VAE's decoding equal ComfyUI's
(tests/models/fixtures/comfyui_ltxv.json, recorded by scripts/record_comfyui_ltxv.py)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest
import torch

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import probe
from nodes.models.ltxv_demo import CHECKPOINT, build_demo_ltxv
from tests.node_calls import active_workspace
from tests.recorded_tensors import at_recorded, tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_ltxv.json").read_text())
ATOL, RTOL = 1e-5, 1e-4


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """An active workspace holding ltxv-tiny, whose ModelFns run in-process."""
    torch.set_num_threads(1)
    yield from active_workspace(tmp_path_factory.mktemp("ltxv-ws"), build_demo_ltxv)


def _ref(workspace, component: str):
    return make_ref(component, "ltxv", [workspace.models_dir / CHECKPOINT])


def test_the_file_is_the_recorded_one_detected_as_ltxv(workspace) -> None:
    rec = FIXTURE["files"]["checkpoint"]
    assert rec["path"] == CHECKPOINT
    assert hashlib.sha256((workspace.models_dir / CHECKPOINT).read_bytes()).hexdigest() == rec["sha256"]
    assert FIXTURE["model_config"] == "LTXV" and FIXTURE["unet_config"]["image_model"] == "ltxv"
    info = probe(workspace.models_dir / CHECKPOINT)
    assert (info.arch, info.kind) == ("ltxv", "checkpoint")
    assert {"diffusion_model", "vae"} <= set(info.components)


def test_img_to_video_equals_comfyuis(workspace) -> None:
    from nodes.library.ltxv_img_to_video import LTXVImgToVideo

    rec = FIXTURE["img_to_video"]
    cond = [[tensor(FIXTURE["context"]), {}]]
    pos, neg, latent = asyncio.run(
        LTXVImgToVideo().execute(cond, cond, _ref(workspace, "vae"), tensor(FIXTURE["image"]), 96, 64, 17, 1, 0.85)
    )
    assert pos is cond and neg is cond and rec["positive_is_input"]
    torch.testing.assert_close(latent["noise_mask"], tensor(rec["noise_mask"]), atol=0, rtol=0)
    samples = latent["samples"]
    torch.testing.assert_close(at_recorded(samples, rec["samples"]), tensor(rec["samples"]), atol=ATOL, rtol=RTOL)


def test_one_step_equals_comfyuis_plain_and_under_the_noise_mask(workspace) -> None:
    model = loader.load_diffusion_model(_ref(workspace, "diffusion_model"))
    step = FIXTURE["step"]
    x = tensor(step["x"])
    cond = {
        "context": tensor(FIXTURE["context"]),
        "attention_mask": tensor(FIXTURE["attention_mask"]),
        "frame_rate": step["frame_rate"],
    }
    sigma = torch.tensor([step["sigma"]])
    with torch.no_grad():
        # ComfyUI's LTXV is a flux-kind flow model: denoised = x - sigma * output
        plain = x - sigma.view(-1, 1, 1, 1, 1) * model.apply(x, sigma, cond)
        mask = tensor(FIXTURE["img_to_video"]["noise_mask"]).expand(x.shape[0], x.shape[1], -1, *x.shape[3:])
        t = model.step_timesteps(sigma, mask)
        masked = x - sigma.view(-1, 1, 1, 1, 1) * model.apply(x, t, cond)
    torch.testing.assert_close(at_recorded(plain, step["plain"]), tensor(step["plain"]), atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(at_recorded(masked, step["masked"]), tensor(step["masked"]), atol=ATOL, rtol=RTOL)
    assert not torch.allclose(plain, masked)  # the kept frame's tokens see timestep 0


def test_the_vae_decodes_as_comfyuis(workspace) -> None:
    rec = FIXTURE["decode"]
    vae = loader.load_vae(_ref(workspace, "vae"))
    latent = torch.randn(*rec["latent_shape"], generator=torch.Generator().manual_seed(rec["latent_seed"]))
    image = vae.decode(latent * rec["scale"]).unsqueeze(0)  # ComfyUI keeps the video axis: [1, frames, H, W, 3]
    torch.testing.assert_close(at_recorded(image, rec["image"]), tensor(rec["image"]), atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize(
    ("vae_config", "named"), [(None, "0.9.0's layout"), ({"timestep_conditioning": True}, "timestep-conditioned")]
)
def test_a_vae_layout_not_handled_is_refused_by_name(workspace, tmp_path, vae_config, named) -> None:
    from safetensors.torch import load_file, save_file

    from nodes.models.errors import ModelLoadError
    from nodes.models.ltxv_demo import TRANSFORMER_CONFIG

    config = {"transformer": TRANSFORMER_CONFIG, **({"vae": vae_config} if vae_config is not None else {})}
    path = tmp_path / "ltx-video-2b-v0.9.safetensors"  # the tiny tensors, other metadata
    save_file(load_file(workspace.models_dir / CHECKPOINT), str(path), metadata={"config": json.dumps(config)})
    with pytest.raises(ModelLoadError, match=named):
        loader.load_vae(make_ref("vae", "ltxv", [path]))
