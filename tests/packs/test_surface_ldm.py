"""comfy.ldm / comfy.cldm / comfy.k_diffusion.utils: the attention functions, embeddings, rope, distributions,
norms and small transformer blocks packs use give ComfyUI's numbers (fixture recorded on ComfyUI 0.3.64 by
scripts/record_comfyui_ldm.py, whose run_cases builds the same seeded inputs here); the model classes packs
subclass or isinstance-check exist and refuse to be built with UnsupportedFeature."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from PIL import Image

import comfy_bridge.compat as compat
from comfy_bridge.compat.comfy.cldm import cldm as cldm_module
from comfy_bridge.compat.comfy.k_diffusion import utils as kd_utils
from comfy_bridge.compat.comfy.ldm import common_dit
from comfy_bridge.compat.comfy.ldm.flux import layers as flux_layers
from comfy_bridge.compat.comfy.ldm.flux import math as flux_math
from comfy_bridge.compat.comfy.ldm.flux import model as flux_model
from comfy_bridge.compat.comfy.ldm.models import autoencoder
from comfy_bridge.compat.comfy.ldm.modules import attention
from comfy_bridge.compat.comfy.ldm.modules.diffusionmodules import mmdit, openaimodel, util
from comfy_bridge.compat.comfy.ldm.modules.distributions import distributions
from comfy_bridge.compat.comfy.ldm.qwen_image import model as qwen
from comfy_bridge.compat.comfy.ldm.wan import model as wan
from comfy_bridge.packs.origin import UnsupportedFeature

from .recorded import load

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = load("comfyui_ldm.json")["cases"]


def recorder():
    spec = importlib.util.spec_from_file_location("record_comfyui_ldm", ROOT / "scripts" / "record_comfyui_ldm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ours() -> dict:
    api = SimpleNamespace(
        attention=attention,
        util=util,
        flux_layers=flux_layers,
        flux_math=flux_math,
        wan=wan,
        qwen=qwen,
        distributions=distributions,
        mmdit=mmdit,
        common_dit=common_dit,
        openaimodel=openaimodel,
    )
    with torch.no_grad():
        return recorder().run_cases(api)


def assert_matches(got, want, where: str) -> None:
    if isinstance(want, dict) and "shape" in want and "sum" in want:
        assert got["shape"] == want["shape"] and got["dtype"] == want["dtype"], where
        rel = tol = 5e-3 if want["dtype"] in ("bfloat16", "float16") else 1e-5
        assert got["abs"] == pytest.approx(want["abs"], rel=rel, abs=tol), where
        # a sum may cancel: its tolerance scales with the absolute sum
        assert got["sum"] == pytest.approx(want["sum"], rel=rel, abs=tol * max(1.0, want["abs"])), where
        assert got["head"] == pytest.approx(want["head"], rel=rel, abs=tol), where
    elif isinstance(want, dict):
        assert sorted(got) == sorted(want), where
        for key in want:
            assert_matches(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list) and want and isinstance(want[0], dict):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            assert_matches(g, w, f"{where}[{i}]")
    else:
        assert got == want, where


@pytest.mark.parametrize("group,case", [(g, c) for g, entry in FIXTURE.items() for c in entry])
def test_ldm_function_matches_comfyui(ours, group, case):
    assert_matches(ours[group][case], FIXTURE[group][case], f"{group}.{case}")


def test_attention_override_and_registry():
    q = torch.randn(1, 4, 6)
    seen = []

    def override(func, *args, **kwargs):
        seen.append(func.__name__)
        return func(*args, **kwargs) * 2

    plain = attention.optimized_attention(q, q, q, 2)
    doubled = attention.optimized_attention(q, q, q, 2, transformer_options={"optimized_attention_override": override})
    torch.testing.assert_close(doubled, plain * 2)
    assert seen == ["attention_pytorch"]
    assert attention.attention_pytorch.__wrapped__.__name__ == "attention_pytorch"
    assert attention.get_attention_function("optimized") is attention.optimized_attention
    assert attention.get_attention_function("sub_quad") is attention.attention_sub_quad
    assert attention.get_attention_function("nope", None) is None
    with pytest.raises(KeyError):
        attention.get_attention_function("nope")
    with pytest.raises(UnsupportedFeature, match="xformers"):
        attention.attention_xformers(q, q, q, 2)


def test_chunked_variants_equal_basic_on_long_inputs(monkeypatch):
    monkeypatch.setattr(attention, "QUERY_CHUNK", 5)
    q, k, v, mask = torch.randn(2, 13, 8), torch.randn(2, 9, 8), torch.randn(2, 9, 8), torch.randn(2, 13, 9)
    want = attention.attention_basic(q, k, v, 2, mask=mask)
    for fn in (attention.attention_split, attention.attention_sub_quad, attention.attention_pytorch):
        torch.testing.assert_close(fn(q, k, v, 2, mask=mask), want, atol=1e-5, rtol=1e-5)


def test_blocks_use_the_swapped_optimized_attention(monkeypatch):
    calls = []

    def traced(q, k, v, heads, *args, **kwargs):
        calls.append(heads)
        return attention.attention_basic(q, k, v, heads, *args, **kwargs)

    monkeypatch.setattr(attention, "optimized_attention", traced)
    block = attention.CrossAttention(8, heads=2, dim_head=4)
    block(torch.randn(1, 3, 8))
    assert calls == [2]


MODEL_CLASSES = [
    openaimodel.UNetModel,
    openaimodel.VideoResBlock,
    mmdit.JointBlock,
    flux_layers.DoubleStreamBlock,
    flux_layers.SingleStreamBlock,
    flux_model.Flux,
    autoencoder.AutoencoderKL,
    cldm_module.ControlNet,
    cldm_module.ControlledUnetModel,
]


@pytest.mark.parametrize("cls", MODEL_CLASSES, ids=[c.__name__ for c in MODEL_CLASSES])
def test_model_classes_exist_and_refuse_to_build(cls):
    assert issubclass(cls, torch.nn.Module)

    class PackSubclass(cls):
        pass

    for target in (cls, PackSubclass):
        with pytest.raises(UnsupportedFeature, match=cls.__name__) as err:
            target(1, 2, context_dim=3)
        assert "own engine" in str(err.value)
    assert not isinstance(torch.nn.Linear(1, 1), cls)


def test_spatial_transformer_is_the_same_class_in_both_modules():
    assert openaimodel.SpatialTransformer is attention.SpatialTransformer
    assert openaimodel.timestep_embedding is util.timestep_embedding


def test_folder_of_images(tmp_path):
    (tmp_path / "sub").mkdir()
    Image.new("L", (3, 2), 128).save(tmp_path / "sub" / "b.PNG")
    Image.new("RGB", (2, 2), (1, 2, 3)).save(tmp_path / "a.jpg")
    (tmp_path / "notes.txt").write_text("x")
    folder = kd_utils.FolderOfImages(tmp_path)
    assert len(folder) == 2 and [p.name for p in folder.paths] == ["a.jpg", "b.PNG"]
    (image,) = folder[1]
    assert image.mode == "RGB" and image.size == (3, 2)
    assert kd_utils.FolderOfImages(tmp_path, transform=lambda im: im.size)[0] == ((2, 2),)
    assert repr(folder) == f'FolderOfImages(root="{tmp_path}", len: 2)'


def test_pack_module_paths_resolve_to_ours():
    compat.install()
    import comfy.cldm.cldm
    import comfy.k_diffusion.utils
    import comfy.ldm.modules.attention
    from comfy.ldm.modules.diffusionmodules.openaimodel import UNetModel

    assert comfy.ldm.modules.attention is attention
    assert UNetModel is openaimodel.UNetModel
    assert comfy.cldm.cldm.ControlNet is cldm_module.ControlNet
    assert comfy.k_diffusion.utils.FolderOfImages is kd_utils.FolderOfImages
