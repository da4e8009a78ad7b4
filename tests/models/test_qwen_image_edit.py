"""Qwen-Image-Edit's prompt encoders (TextEncodeQwenImageEdit, TextEncodeQwenImageEditPlus) and the Qwen2.5-VL
vision tower they read images with, checked against ComfyUI 0.3.64 on the tiny demo files.

tests/models/fixtures/comfyui_qwen_image_edit.json.xz was recorded by scripts/record_comfyui_qwen_image_edit.py
(ComfyUI commit a125cd84) from the files demo-models writes (qwen-image-tiny's transformer and VAE,
qwen-image-edit-tiny's text encoder with its `visual.*` tower and LoRA): the tower's tokens, the token ids of
edit prompts, and the conditioning both nodes return (states and reference latents) for several image sets."""

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
from nodes.models.qwen_image_demo import FILES as QWEN_IMAGE_FILES
from nodes.models.qwen_image_demo import build_demo_qwen_image
from nodes.models.qwen_image_edit_demo import FILES, build_demo_qwen_image_edit
from nodes.models.qwen_vl import IMAGE_PAD_ID, image_embeddings
from tests.recorded_tensors import at_recorded, load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_qwen_image_edit.json.xz")
ATOL, RTOL = 2e-5, 1e-4
ALL_FILES = {**QWEN_IMAGE_FILES, **FILES}


def image(seed: int, height: int, width: int, batch: int = 1) -> torch.Tensor:
    """The recording script's seeded IMAGE."""
    return torch.rand(batch, height, width, 3, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("qwen-image-edit") / "models"
    build_demo_qwen_image(root)
    build_demo_qwen_image_edit(root)
    return root


@pytest.fixture(scope="module")
def text_encoder(models):
    return loader.load_text_encoder(
        make_ref("text_encoder", "qwen_image", [models / FILES["text_encoder"]], clip_type="qwen_image")
    )


def test_files_are_the_recorded_ones(models) -> None:
    for part, rec in FIXTURE["files"].items():
        assert rec["path"] == ALL_FILES[part]
        assert hashlib.sha256((models / rec["path"]).read_bytes()).hexdigest() == rec["sha256"], (
            f"{rec['path']} changed: re-record tests/models/fixtures/comfyui_qwen_image_edit.json.xz"
        )
    info = probe(models / FILES["text_encoder"])
    assert (info.arch, info.kind) == ("qwen25", "text_encoder")
    assert (probe(models / FILES["lora"]).arch, probe(models / FILES["lora"]).kind) == ("qwen_image", "lora")


@pytest.mark.parametrize("name", sorted(FIXTURE["vision"]))
def test_vision_tokens_equal_comfyuis(text_encoder, name: str) -> None:
    """Resizing to 28-pixel cells (and up to the minimum pixels), the patches, the windowed tower and the merger,
    in ComfyUI's (windowed) token order; a batch's first image only."""
    rec = FIXTURE["vision"][name]
    embeds, grid = image_embeddings(
        text_encoder.modules["visual"], image(rec["seed"], *rec["size"][1:], batch=rec["size"][0])
    )
    assert [list(grid)] == rec["grid"]
    torch.testing.assert_close(embeds, tensor(rec["embeds"]), atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("name", sorted(FIXTURE["tokens"]))
def test_edit_tokens_equal_comfyuis(text_encoder, name: str) -> None:
    rec = FIXTURE["tokens"][name]
    ids = [
        t for t, _ in text_encoder.tokenize(rec["text"], images=rec["images"], template=rec["template"])["qwen25_7b"][0]
    ]
    pads = [i for i, t in enumerate(ids) if t == IMAGE_PAD_ID][: rec["images"]]
    assert [-1 if i in pads else t for i, t in enumerate(ids)] == rec["ids"]


def _run_node(node: str, clip, vae, images: dict) -> list:
    from nodes.library.qwen import TextEncodeQwenImageEdit, TextEncodeQwenImageEditPlus

    cls = {
        "TextEncodeQwenImageEdit": TextEncodeQwenImageEdit,
        "TextEncodeQwenImageEditPlus": TextEncodeQwenImageEditPlus,
    }[node]
    inputs = {k: image(*v) for k, v in images.items()}
    return asyncio.run(cls().execute(clip, "make the disc a red cube", vae=vae, **inputs))[0]


@pytest.mark.parametrize("name", sorted(FIXTURE["nodes"]))
def test_node_conditioning_equals_comfyuis(demo_workspace, fixed_threads, name: str) -> None:
    """Both nodes' CONDITIONING: the states (images read inside the prompt, resized as ComfyUI does) and the
    reference latents (VAE-encoded at about one megapixel), for one to three images, a missing first image,
    no VAE and no image."""
    from nodes.loaders import CLIPLoader, VAELoader

    rec = FIXTURE["nodes"][name]
    (clip,) = CLIPLoader().load_clip(Path(FILES["text_encoder"]).name, "qwen_image")
    (vae,) = VAELoader().load_vae(Path(QWEN_IMAGE_FILES["vae"]).name)
    [(cond, opts)] = _run_node(rec["node"], clip, vae if rec["vae"] else None, rec["images"])
    torch.testing.assert_close(at_recorded(cond, rec["cond"]), tensor(rec["cond"]), atol=ATOL, rtol=RTOL)
    refs = opts.get("reference_latents", [])
    assert len(refs) == len(rec["reference_latents"])
    for ours, theirs in zip(refs, rec["reference_latents"]):
        torch.testing.assert_close(at_recorded(ours, theirs), tensor(theirs), atol=ATOL, rtol=RTOL)


def test_images_need_a_vision_tower(demo_workspace) -> None:
    """Qwen-Image's text-only demo file has no visual.* tensors: an image is refused by name, text still works."""
    from nodes.loaders import CLIPLoader

    (clip,) = CLIPLoader().load_clip(Path(QWEN_IMAGE_FILES["text_encoder"]).name, "qwen_image")
    with pytest.raises(ValueError, match="no vision tower"):
        _run_node("TextEncodeQwenImageEditPlus", clip, None, {"image1": (4, 48, 64)})
    [(cond, opts)] = _run_node("TextEncodeQwenImageEditPlus", clip, None, {})
    assert cond.shape[-1] == 32 and "reference_latents" not in opts


def test_other_clips_and_bad_images_are_refused(demo_workspace) -> None:
    from nodes.library.qwen import TextEncodeQwenImageEditPlus
    from nodes.loaders import CLIPLoader

    (sd1,) = CLIPLoader().load_clip("sd1-tiny-clip.safetensors", "stable_diffusion")
    with pytest.raises(ValueError, match="clip: the Qwen-Image-Edit encoders need"):
        _run_node("TextEncodeQwenImageEdit", sd1, None, {})
    (clip,) = CLIPLoader().load_clip(Path(FILES["text_encoder"]).name, "qwen_image")
    with pytest.raises(ValueError, match="image2: expected an IMAGE"):
        asyncio.run(TextEncodeQwenImageEditPlus().execute(clip, "x", image2=torch.rand(8, 8)))


def test_released_tower_sizes() -> None:
    """The released Qwen2.5-VL-7B tower's shapes (meta device) give ComfyUI's fixed sizes: 32 blocks of 16
    heads x 80, a 3420-wide MLP, 14-pixel patches over two frames, merged to the 3584-wide text states."""
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import (
        Qwen2_5_VLVisionConfig,
    )
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
        Qwen2_5_VisionTransformerPretrainedModel,
    )

    from nodes.models.qwen_vl import vision_config

    with torch.device("meta"):
        sd = Qwen2_5_VisionTransformerPretrainedModel(
            Qwen2_5_VLVisionConfig(
                depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=3584
            )
        ).state_dict()
    cfg = vision_config(sd)
    assert (
        cfg.depth,
        cfg.hidden_size,
        cfg.num_heads,
        cfg.intermediate_size,
        cfg.patch_size,
        cfg.temporal_patch_size,
        cfg.out_hidden_size,
        list(cfg.fullatt_block_indexes),
        cfg.window_size,
    ) == (32, 1280, 16, 3420, 14, 2, 3584, [7, 15, 23, 31], 112)


FIXTURE_2511 = json.loads((Path(__file__).parent / "fixtures" / "comfyui_qwen_image_edit_2511.json").read_text())


def _inputs_2511(case: dict, width: int):
    """The 2511 recording script's draws, in its order."""
    g = torch.Generator().manual_seed(case["seed"])
    x = torch.randn(case["shape"], generator=g)
    context = torch.randn(case["shape"][0], 7, width, generator=g)
    return x, context, [torch.randn(r, generator=g) for r in case["refs"]]


@pytest.fixture(scope="module")
def transformers_2511(models) -> dict:
    return {
        k: loader.load_diffusion_model(make_ref("diffusion_model", "qwen_image", [models / rec["path"]]))
        for k, rec in FIXTURE_2511["files"].items()
    }


def test_2511_files_and_default_method_are_comfyuis(models, transformers_2511) -> None:
    """Qwen-Image-Edit 2511's file carries `__index_timestep_zero__`, which makes index_timestep_zero the default
    reference method (as ComfyUI 0.10.0's detection says); the 2509-layout file keeps index."""
    for rec in FIXTURE_2511["files"].values():
        assert hashlib.sha256((models / rec["path"]).read_bytes()).hexdigest() == rec["sha256"]
    assert {k: m.default_ref_method for k, m in transformers_2511.items()} == FIXTURE_2511["default_ref_method"]
    info = probe(models / FILES["transformer_2511"])
    assert (info.arch, info.kind) == ("qwen_image", "diffusion_model")


@pytest.mark.parametrize("name", sorted(FIXTURE_2511["cases"]))
def test_2511_reference_method_equals_comfyuis(transformers_2511, name: str) -> None:
    """The transformer's output with reference latents: timestep-zero modulation of the references by default
    on the 2511 file or when asked for on the 2509 one, plain index when asked for, none without references."""
    case = FIXTURE_2511["cases"][name]
    model = transformers_2511[case["file"]]
    x, context, refs = _inputs_2511(case, 32)
    cond = {"context": context, "ref_latents": refs, "ref_latents_method": case["method"]}
    out = model.apply(x, torch.tensor([case["timestep"]] * case["shape"][0]), cond)
    torch.testing.assert_close(out, tensor(case["out"]), atol=ATOL, rtol=RTOL)


def test_the_method_node_offers_timestep_zero() -> None:
    from nodes.library.flux import FluxKontextMultiReferenceLatentMethod

    (cond,) = FluxKontextMultiReferenceLatentMethod().execute([[torch.zeros(1, 1, 1), {}]], "index_timestep_zero")
    assert cond[0][1] == FIXTURE_2511["method_node"]
