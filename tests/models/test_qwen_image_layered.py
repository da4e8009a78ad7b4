"""Qwen-Image-Layered on the tiny files against upstream ComfyUI 0.10.0 (commit 79cdbc81; 0.3.64 has none of it):
tests/models/fixtures/comfyui_qwen_image_layered.json was recorded by scripts/record_comfyui_qwen_image_layered.py.
The layered transformer denoises several frames (the composite and one per layer) with the input image's
reference latent at frame index -1 and the learned addition_t_embedding row 0; its VAE is the RGBA (4-channel)
Wan 2.1 VAE."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import probe
from nodes.models.qwen_image_demo import build_demo_qwen_image
from nodes.models.qwen_image_layered_demo import FILES, build_demo_qwen_image_layered
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_qwen_image_layered.json").read_text())
ATOL, RTOL = 1e-5, 1e-4


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("qwen-image-layered") / "models"
    build_demo_qwen_image(root)
    build_demo_qwen_image_layered(root)
    return root


@pytest.fixture(scope="module")
def transformer(models):
    return loader.load_diffusion_model(make_ref("diffusion_model", "qwen_image", [models / FILES["transformer"]]))


@pytest.fixture(scope="module")
def vae(models):
    return loader.load_vae(make_ref("vae", "qwen_image", [models / FILES["vae"]]))


def test_files_are_the_recorded_ones(models) -> None:
    for rec in FIXTURE["files"].values():
        digest = hashlib.sha256((models / rec["path"]).read_bytes()).hexdigest()
        assert digest == rec["sha256"], f"{rec['path']} changed: re-record {FIXTURE['recorded_by']}"


def test_detected_as_comfyui_detects_it(models, transformer) -> None:
    """The addition_t_embedding key makes the layered model (use_additional_t_cond, negative_index)."""
    assert FIXTURE["detected"] == {
        "default_ref_method": "negative_index",
        "use_additional_t_cond": True,
        "latent_format": "Wan21",
    }
    assert transformer.default_ref_method == FIXTURE["detected"]["default_ref_method"]
    assert transformer.module.config.use_additional_t_cond
    info = probe(models / FILES["transformer"])
    assert (info.arch, info.kind) == ("qwen_image", "diffusion_model")
    assert probe(models / FILES["vae"]).arch == "qwen_image"


def _inputs(case: dict, width: int):
    """The recording script's draws, in its order."""
    g = torch.Generator().manual_seed(case["seed"])
    x = torch.randn(case["shape"], generator=g)
    context = torch.randn(case["shape"][0], 7, width, generator=g)
    return x, context, [torch.randn(r, generator=g) for r in case["refs"]]


@pytest.mark.parametrize("name", sorted(FIXTURE["cases"]))
def test_layered_transformer_equals_comfyuis(transformer, fixed_threads, name: str) -> None:
    """Several frames at once (with a reference latent, an odd size, a batch of two without one)."""
    case = FIXTURE["cases"][name]
    x, context, refs = _inputs(case, 32)
    out = transformer.apply(
        x, torch.tensor([case["timestep"]] * case["shape"][0]), {"context": context, "ref_latents": refs}
    )
    torch.testing.assert_close(out, tensor(case["out"]), atol=ATOL, rtol=RTOL)


def test_the_frames_see_each_other(transformer) -> None:
    """A change in one layer's frame changes the others' outputs (one joint sequence, not frames apart)."""
    case = FIXTURE["cases"]["three_frames_reference"]
    x, context, refs = _inputs(case, 32)
    t = torch.tensor([case["timestep"]])
    before = transformer.apply(x, t, {"context": context, "ref_latents": refs})
    x[:, :, 2] += 1.0
    after = transformer.apply(x, t, {"context": context, "ref_latents": refs})
    assert not torch.allclose(before[:, :, 0], after[:, :, 0])


def test_rgba_vae_equals_comfyuis(vae, fixed_threads) -> None:
    """3-channel IMAGE encodes with an opaque alpha added; latents decode to 4-channel IMAGE."""
    rec = FIXTURE["vae"]
    assert rec["output_channels"] == 4
    encoded = vae.encode(tensor(rec["pixels"]))
    torch.testing.assert_close(encoded, tensor(rec["encoded"])[:, :, 0], atol=ATOL, rtol=RTOL)
    decoded = vae.decode(tensor(rec["latent"]))
    want = tensor(rec["decoded"])
    torch.testing.assert_close(decoded, want.reshape(-1, *want.shape[-3:]), atol=ATOL, rtol=RTOL)


def test_a_plain_qwen_image_refuses_layers(models) -> None:
    """Only the layered model takes several frames; Qwen-Image says what it takes."""
    from nodes.models.qwen_image_demo import FILES as QWEN_IMAGE_FILES

    plain = loader.load_diffusion_model(
        make_ref("diffusion_model", "qwen_image", [models / QWEN_IMAGE_FILES["transformer"]])
    )
    with pytest.raises(ValueError, match="single images; this latent has 3 frames"):
        plain.apply(torch.zeros(1, 16, 3, 4, 4), torch.tensor([0.5]), {"context": torch.zeros(1, 7, 32)})


def test_fp8_weight_dtype_rounds_the_stored_weights() -> None:
    """UNETLoader's fp8 weight_dtype keeps each weight as its nearest fp8 value (the Control template asks it; the
    e2e test compares that template's images with ComfyUI's)."""
    from nodes.models.qwen_image import stored_as

    sd = {"w": torch.tensor([0.1, 1.0, 300.0], dtype=torch.bfloat16)}
    assert stored_as(sd, "default") is sd
    assert stored_as(sd, "fp8_e4m3fn")["w"].tolist() == [0.1015625, 1.0, 288.0]
    assert stored_as(sd, "fp8_e4m3fn")["w"].dtype == torch.bfloat16
