"""SigLIP vision in CLIPVisionLoader / CLIPVisionEncode and Flux Redux in StyleModelLoader / StyleModelApply give
ComfyUI 0.3.64's outputs on the tiny demo files (sigclip-vision-tiny, flux1-redux-dev-tiny): preprocessing bit for
bit, every CLIP_VISION_OUTPUT tensor and the Redux conditioning within 1e-5 (tests/nodes/fixtures/
comfyui_siglip_redux.json.xz, recorded by scripts/record_comfyui_siglip_redux.py). And the loader's rules: a SigLIP
file is told by its layout, SigLIP's pooling head is ignored, layouts ComfyUI has no config for are refused."""

from __future__ import annotations

import asyncio
import hashlib
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from nodes.library.clip_vision import CLIPVisionEncode, CLIPVisionLoader
from nodes.library.style_model import StyleModelApply, StyleModelLoader
from nodes.models.clip_vision import is_clip_vision, preprocess
from nodes.models.errors import ModelLoadError
from nodes.models.redux_demo import REDUX, SIGLIP, build_demo_redux, tiny_siglip_state_dict
from nodes.models.siglip_vision import is_siglip_vision, load_siglip_vision
from tests.recorded_tensors import load_json, tensor

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from record_comfyui_clip_vision import digest  # noqa: E402
from record_comfyui_siglip_redux import REDUX_CASES, TEXT_WIDTH, images  # noqa: E402
from record_comfyui_style_model import conditioning  # noqa: E402

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_siglip_redux.json.xz")
SIGLIP_NAME = Path(SIGLIP).name
REDUX_NAME = Path(REDUX).name


@pytest.fixture(scope="module")
def redux_files(demo_workspace) -> Path:
    models = demo_workspace.models_dir
    if not all((models / rel).exists() for rel in (SIGLIP, REDUX)):
        build_demo_redux(models)
    return models


def _encode(image: torch.Tensor, crop: str):
    (clip_vision,) = CLIPVisionLoader().load_clip(SIGLIP_NAME)
    return asyncio.run(CLIPVisionEncode().encode(clip_vision, image, crop))[0]


def _assert_sample(actual: torch.Tensor, recorded: dict) -> None:
    assert list(actual.shape) == recorded["shape"]
    want = tensor(recorded["values"])
    got = actual.flatten()[:: recorded["step"]]
    assert got.shape == want.shape and float((got - want).abs().max()) <= 1e-5


def test_the_demo_files_are_the_recorded_ones(redux_files):
    for rel, key in ((SIGLIP, "siglip_sha256"), (REDUX, "redux_sha256")):
        assert hashlib.sha256((redux_files / rel).read_bytes()).hexdigest() == FIXTURE[key]


@pytest.mark.parametrize("case", sorted(FIXTURE["encodings"]))
def test_preprocessing_equals_comfyui_bit_for_bit(case):
    torch.set_num_threads(1)
    name, crop = case.split("/")
    pixels = preprocess(images()[name], 384, crop == "center", (0.5,) * 3, (0.5,) * 3)
    expected = FIXTURE["encodings"][case]["preprocessed"]
    assert list(pixels.shape) == expected["shape"] and digest(pixels) == expected["sha256"]


@pytest.mark.parametrize("case", sorted(FIXTURE["encodings"]))
def test_encoding_equals_comfyui(redux_files, case):
    name, crop = case.split("/")
    out = _encode(images()[name], crop)
    expected = FIXTURE["encodings"][case]
    for key in ("last_hidden_state", "image_embeds", "penultimate_hidden_states", "all_hidden_states"):
        _assert_sample(out[key], expected[key])
    assert out.mm_projected is None and expected["mm_projected"] is None


@pytest.mark.parametrize("name, strength, strength_type", REDUX_CASES, ids=[c[0] for c in REDUX_CASES])
def test_redux_conditioning_equals_comfyui(redux_files, name, strength, strength_type):
    (redux,) = StyleModelLoader().load_style_model(REDUX_NAME)
    assert redux.arch == "flux_redux"
    encoded = _encode(images()["wide"], "center")
    (out,) = asyncio.run(
        StyleModelApply().apply_stylemodel(conditioning(name, TEXT_WIDTH), redux, encoded, strength, strength_type)
    )
    expected = FIXTURE["redux"][name]
    assert len(out) == len(expected)
    for (got, keys), want in zip(out, expected):
        assert sorted(keys) == want["keys"]
        _assert_sample(got, want["tensor"])


def test_siglip_is_told_from_clip_by_its_layout(redux_files):
    siglip = tiny_siglip_state_dict()
    assert is_siglip_vision(siglip) and not is_clip_vision(siglip)
    clip_file = {
        "vision_model.embeddings.class_embedding": 0,
        "vision_model.embeddings.patch_embedding.weight": 0,
        "vision_model.encoder.layers.0.layer_norm1.weight": 0,
        "vision_model.post_layernorm.weight": 0,
    }
    assert is_clip_vision(clip_file) and not is_siglip_vision(clip_file)


def test_the_clip_encoder_gives_no_all_hidden_states(redux_files):
    (clip_vision,) = CLIPVisionLoader().load_clip("clip-vision-tiny.safetensors")
    out = asyncio.run(CLIPVisionEncode().encode(clip_vision, images()["wide"], "center"))[0]
    assert out.all_hidden_states is None and out.penultimate_hidden_states is not None


def test_the_pooling_head_is_ignored_as_comfyui_ignores_it():
    sd = tiny_siglip_state_dict()
    image = images()["wide"]
    plain = load_siglip_vision(dict(sd)).encode(image, True)
    gen = torch.Generator().manual_seed(1)
    with_head = {
        **sd,
        "vision_model.head.probe": torch.randn(1, 1, 32, generator=gen),
        "vision_model.head.attention.in_proj_weight": torch.randn(96, 32, generator=gen),
        "vision_model.embeddings.position_ids": torch.arange(729)[None],
    }
    headed = load_siglip_vision(with_head).encode(image, True)
    assert all(torch.equal(plain[k], headed[k]) for k in plain)


def test_a_layout_without_a_comfyui_config_is_refused_by_its_sizes():
    sd = tiny_siglip_state_dict()
    sd["vision_model.embeddings.position_embedding.weight"] = torch.zeros(30 * 30, 32, dtype=torch.float16)
    with pytest.raises(ModelLoadError, match="900 positions of patch 14"):
        load_siglip_vision(sd, "odd.safetensors")


def test_a_non_vision_file_is_still_refused_by_name(redux_files, tmp_path):
    bad = redux_files / "clip_vision" / "not-vision.safetensors"
    save_file({"vision_model.embeddings.patch_embedding.weight": torch.zeros(2, 3, 14, 14)}, str(bad))
    try:
        with pytest.raises(ValueError, match="clip_name: 'not-vision.safetensors' is not a CLIP vision model"):
            CLIPVisionLoader().load_clip("not-vision.safetensors")
    finally:
        bad.unlink()
