"""LTX-2's latent upsampler: LatentUpscaleModelLoader and LTXVLatentUpsampler on tiny files in the published layout
(the demo's x2 upsampler and a rational-resampler x1.5 variant) give upstream ComfyUI 0.10.0's latents within 1e-5
(tests/models/fixtures/comfyui_ltx2_upsampler.json, recorded by scripts/record_comfyui_ltx2_upsampler.py with
ComfyUI's own loader and node on the same files and latents); bad inputs are refused by name."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
from pathlib import Path

import pytest
import torch

from nodes.library.ltxv_upsampler import LatentUpscaleModelLoader, LTXVLatentUpsampler
from nodes.models.ltx2_demo import build_upsampler
from tests.recorded_tensors import tensor

REPO = Path(__file__).resolve().parents[2]
FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_ltx2_upsampler.json").read_text())
ATOL = 1e-5  # measured: 0 (bit-identical on one thread)


def _recorder():
    spec = importlib.util.spec_from_file_location(
        "record_upsampler", REPO / "scripts" / "record_comfyui_ltx2_upsampler.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDER = _recorder()


@pytest.fixture
def workspace(demo_workspace):
    """The demo workspace (ltx2-tiny and its x2 upsampler) with the rational variant beside them."""
    path = demo_workspace.models_dir / RECORDER.RATIONAL_FILE
    build_upsampler(path, RECORDER.RATIONAL_CONFIG)
    yield demo_workspace
    path.unlink()


def _vae():
    from nodes.loaders import CheckpointLoaderSimple

    return CheckpointLoaderSimple().load_checkpoint(Path(RECORDER.CHECKPOINT).name)[2]


def test_files_are_the_recorded_ones(workspace):
    for name, digest in FIXTURE["sha256"].items():
        assert hashlib.sha256((workspace.models_dir / name).read_bytes()).hexdigest() == digest, name


@pytest.mark.parametrize("index", range(len(RECORDER.CASES)))
def test_upsampled_latent_equals_comfyui_0_10(workspace, index):
    torch.set_num_threads(1)
    case = FIXTURE["cases"][index]
    (model,) = LatentUpscaleModelLoader().execute(Path(case["file"]).name)
    latent = tensor(case["latent"])
    mask = torch.ones(latent.shape[0], 1, *latent.shape[2:])
    (out,) = asyncio.run(
        LTXVLatentUpsampler().upsample_latent(
            {"samples": latent, "noise_mask": mask, "batch_index": [0]}, model, _vae()
        )
    )
    expected = tensor(case["upsampled"])
    assert out["samples"].shape == expected.shape and out["samples"].dtype == torch.float32
    torch.testing.assert_close(out["samples"], expected, atol=ATOL, rtol=0)
    assert "noise_mask" not in out and out["batch_index"] == [0]  # the mask no longer fits: dropped, as ComfyUI does


def test_bad_inputs_are_named(workspace):
    with pytest.raises(FileNotFoundError, match="model_name: 'nope.safetensors' is not a file"):
        LatentUpscaleModelLoader().execute("nope.safetensors")
    esrgan_like = workspace.models_dir / "latent_upscale_models" / "not-an-upsampler.safetensors"
    from safetensors.torch import save_file

    save_file({"conv_first.weight": torch.zeros(1, 1, 3, 3)}, str(esrgan_like))
    try:
        with pytest.raises(ValueError, match="model_name: 'not-an-upsampler.safetensors' is not a latent upscale"):
            LatentUpscaleModelLoader().execute(esrgan_like.name)
    finally:
        esrgan_like.unlink()
    (model,) = LatentUpscaleModelLoader().execute(Path(RECORDER.X2_FILE).name)
    vae = _vae()
    with pytest.raises(ValueError, match="upscale_model: expected a LATENT_UPSCALE_MODEL"):
        asyncio.run(LTXVLatentUpsampler().upsample_latent({"samples": torch.zeros(1, 128, 1, 2, 2)}, vae, vae))
    with pytest.raises(ValueError, match=r"video latents \[batch, 128, frames, height, width\]"):
        asyncio.run(LTXVLatentUpsampler().upsample_latent({"samples": torch.zeros(1, 16, 2, 2)}, model, vae))
    with pytest.raises(TypeError, match="samples: expected a LATENT"):
        asyncio.run(LTXVLatentUpsampler().upsample_latent(torch.zeros(1), model, vae))


def test_a_vae_without_latent_statistics_is_refused(workspace):
    from nodes.loaders import VAELoader

    vae = VAELoader().load_vae(workspace.list_files("vae")[0])[0]
    (model,) = LatentUpscaleModelLoader().execute(Path(RECORDER.X2_FILE).name)
    with pytest.raises(ValueError, match="vae: the latent upsampler needs an LTX-2 video VAE"):
        asyncio.run(LTXVLatentUpsampler().upsample_latent({"samples": torch.zeros(1, 128, 1, 2, 2)}, model, vae))
