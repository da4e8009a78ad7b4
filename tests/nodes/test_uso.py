"""USOStyleReference with ModelPatchLoader's USO projector gives ComfyUI 0.3.64's numbers on the tiny demo files
(sigclip-vision-tiny, uso-flux1-projector-v1-tiny, flux-tiny): the projector's style tokens for the node's SigLIP
states and the FLUX.1 forward pass with one and two chained references, within 1e-5 (tests/nodes/fixtures/
comfyui_uso.json, recorded by scripts/record_comfyui_uso.py); a prompt through KSampler uses the patch; and the
node's refusals name what is wrong."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from nodes.library.clip_vision import CLIPVisionEncode, CLIPVisionLoader
from nodes.library.model_patch import ModelPatchLoader, USOStyleReference
from nodes.models.model_patch import load_model_patch
from nodes.models.redux_demo import build_demo_redux
from nodes.models.uso_demo import USO_PROJECTOR, build_demo_uso
from nodes.uso import OPTION
from tests.e2e.test_samplers_on_executors import render_in_process
from tests.recorded_tensors import tensor

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from record_comfyui_siglip_redux import images  # noqa: E402
from record_comfyui_uso import flux_inputs  # noqa: E402

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_uso.json").read_text())
USO_NAME = Path(USO_PROJECTOR).name


@pytest.fixture(scope="module")
def uso_files(demo_workspace) -> Path:
    models = demo_workspace.models_dir
    if not (models / "clip_vision" / "sigclip-vision-tiny.safetensors").exists():
        build_demo_redux(models)
    if not (models / USO_PROJECTOR).exists():
        build_demo_uso(models)
    return models


@pytest.fixture(scope="module")
def flux_model(uso_files):
    from nodes.loaders import UNETLoader
    from nodes.models.loader import load_diffusion_model

    return load_diffusion_model(UNETLoader().load_unet("flux-tiny.safetensors", "default")[0])


def _encoded(name: str):
    (vision,) = CLIPVisionLoader().load_clip("sigclip-vision-tiny.safetensors")
    return asyncio.run(CLIPVisionEncode().encode(vision, images()[name], "center"))[0]


def _patched(model, *names: str):
    (patch,) = ModelPatchLoader().load_model_patch(USO_NAME)
    for name in names:
        (model,) = USOStyleReference().apply_patch(model, patch, _encoded(name))
    return model, patch


def _flux_ref():
    from nodes.loaders import UNETLoader

    return UNETLoader().load_unet("flux-tiny.safetensors", "default")[0]


def test_the_demo_files_are_the_recorded_ones(uso_files):
    for rel, key in ((USO_PROJECTOR, "uso_sha256"), ("diffusion_models/flux-tiny.safetensors", "flux_sha256")):
        assert hashlib.sha256((uso_files / rel).read_bytes()).hexdigest() == FIXTURE[key]


def test_style_tokens_equal_comfyui(uso_files):
    model, patch = _patched(_flux_ref(), "wide", "square_384")
    projector = load_model_patch(patch)
    for entry, name in zip(model.option(OPTION), ("wide", "square_384")):
        with torch.no_grad():
            tokens = projector(entry.encoded)
        want = tensor(FIXTURE["tokens"][name])
        assert tokens.shape == want.shape and float((tokens - want).abs().max()) <= 1e-5


@pytest.mark.parametrize("case, names", [("plain", ()), ("one", ("wide",)), ("two", ("wide", "square_384"))])
def test_flux_forward_with_uso_equals_comfyui(flux_model, case, names):
    model, patch = _patched(_flux_ref(), *names)
    projector = load_model_patch(patch)
    inputs = flux_inputs()
    cond = {"context": inputs["context"], "pooled": inputs["y"], "guidance": FIXTURE["guidance"]}
    with torch.no_grad():
        cond["uso_tokens"] = [projector(e.encoded) for e in model.option(OPTION, ())]
        out = flux_model.apply(inputs["x"], torch.tensor([FIXTURE["sigma"]]), cond)
    want = tensor(FIXTURE["forward"][case])
    assert float((out - want).abs().max()) <= 1e-5
    if names:  # the tokens matter: without them the pass is the plain one
        assert float((want - tensor(FIXTURE["forward"]["plain"])).abs().max()) > 1e-3


def _prompt(with_uso: bool) -> dict:
    p = {
        "ckpt": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "flux-tiny.safetensors"}},
        "text": {"class_type": "CLIPTextEncode", "inputs": {"text": "a field of flowers", "clip": ["ckpt", 1]}},
        "latent": {"class_type": "EmptySD3LatentImage", "inputs": {"width": 64, "height": 64, "batch_size": 1}},
        "sample": {
            "class_type": "KSampler",
            "inputs": {
                "model": ["ckpt", 0],
                "positive": ["text", 0],
                "negative": ["text", 0],
                "latent_image": ["latent", 0],
                "seed": 3,
                "steps": 2,
                "cfg": 1.0,
                "sampler_name": "euler",
                "scheduler": "simple",
                "denoise": 1.0,
            },
        },
        "decode": {"class_type": "VAEDecode", "inputs": {"samples": ["sample", 0], "vae": ["ckpt", 2]}},
        "save": {"class_type": "SaveImage", "inputs": {"images": ["decode", 0], "filename_prefix": "uso"}},
    }
    if with_uso:
        p["vision"] = {"class_type": "CLIPVisionLoader", "inputs": {"clip_name": "sigclip-vision-tiny.safetensors"}}
        p["image"] = {"class_type": "LoadImage", "inputs": {"image": "example.png"}}
        p["encode"] = {
            "class_type": "CLIPVisionEncode",
            "inputs": {"clip_vision": ["vision", 0], "image": ["image", 0], "crop": "center"},
        }
        p["patch"] = {"class_type": "ModelPatchLoader", "inputs": {"name": USO_NAME}}
        p["uso"] = {
            "class_type": "USOStyleReference",
            "inputs": {"model": ["ckpt", 0], "model_patch": ["patch", 0], "clip_vision_output": ["encode", 0]},
        }
        p["sample"]["inputs"]["model"] = ["uso", 0]
    return p


def test_ksampler_samples_with_the_style_tokens(uso_files, demo_workspace):
    images_out = render_in_process(demo_workspace, {"plain": _prompt(False), "uso": _prompt(True)})
    assert images_out["uso"].shape == images_out["plain"].shape
    assert not np.array_equal(images_out["uso"], images_out["plain"])


def test_a_clip_output_without_all_layers_is_refused(uso_files):
    (clip,) = CLIPVisionLoader().load_clip("clip-vision-tiny.safetensors")
    out = asyncio.run(CLIPVisionEncode().encode(clip, images()["wide"], "center"))[0]
    (patch,) = ModelPatchLoader().load_model_patch(USO_NAME)
    with pytest.raises(ValueError, match="clip_vision_output: USO needs every layer's states"):
        USOStyleReference().apply_patch(_flux_ref(), patch, out)


def test_a_model_other_than_flux_is_refused(uso_files):
    from nodes.loaders import CheckpointLoaderSimple

    (sd1, _, _) = CheckpointLoaderSimple().load_checkpoint("sd1-tiny.safetensors")
    (patch,) = ModelPatchLoader().load_model_patch(USO_NAME)
    with pytest.raises(ValueError, match="model: USO's style tokens patch FLUX.1 models, not sd1"):
        USOStyleReference().apply_patch(sd1, patch, _encoded("wide"))


def test_an_incomplete_projector_is_refused_by_name(uso_files):
    path = uso_files / "model_patches" / "uso_incomplete_test.safetensors"
    save_file({"feature_embedder.mid_layer_norm.bias": torch.zeros(2)}, str(path))
    try:
        with pytest.raises(ValueError, match="is an incomplete USO style projector"):
            ModelPatchLoader().load_model_patch(path.name)
    finally:
        path.unlink()


def test_the_projector_is_no_controlnet(uso_files):
    from nodes.library.model_patch import QwenImageDiffsynthControlnet
    from nodes.loaders import CheckpointLoaderSimple

    (model, _, vae) = CheckpointLoaderSimple().load_checkpoint("flux-tiny.safetensors")
    (patch,) = ModelPatchLoader().load_model_patch(USO_NAME)
    with pytest.raises(ValueError, match="model_patch: USO's style projector is applied with USOStyleReference"):
        QwenImageDiffsynthControlnet().diffsynth_controlnet(model, patch, vae, torch.zeros(1, 64, 64, 3), 1.0)
