"""CLIPVisionLoader + CLIPVisionEncode give ComfyUI's outputs for the demo CLIP vision model: the
preprocessing ("center" and "none" crops) bit for bit, the encoder's tensors within float rounding, against
ComfyUI 0.3.64's clip_preprocess and ClipVisionModel.encode_image (tests/nodes/fixtures/comfyui_clip_vision.json,
recorded by scripts/record_comfyui_clip_vision.py); OpenCLIP-layout files load to the same model."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from nodes.library.clip_vision import CLIPVisionEncode, CLIPVisionLoader
from nodes.models import clip as clip_mod
from nodes.models.clip_vision import preprocess
from nodes.models.safetensors_io import load_state_dict

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from record_comfyui_clip_vision import digest, images  # noqa: E402  (the recorder's own inputs)

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_clip_vision.json").read_text())
NAME = "clip-vision-tiny.safetensors"


def _encode(name: str, image: torch.Tensor, crop: str):
    (clip_vision,) = CLIPVisionLoader().load_clip(name)
    return asyncio.run(CLIPVisionEncode().encode(clip_vision, image, crop))[0]


def test_the_demo_model_is_the_recorded_one(demo_workspace):
    data = (demo_workspace.models_dir / "clip_vision" / NAME).read_bytes()
    assert hashlib.sha256(data).hexdigest() == FIXTURE["model_sha256"]


@pytest.mark.parametrize("case", sorted(FIXTURE["cases"]))
def test_preprocessing_equals_comfyui_bit_for_bit(case):
    name, crop = case.split("/")
    pixels = preprocess(images()[name], 224, crop == "center")
    expected = FIXTURE["cases"][case]["preprocessed"]
    assert list(pixels.shape) == expected["shape"] and digest(pixels) == expected["sha256"]


@pytest.mark.parametrize("case", sorted(FIXTURE["cases"]))
def test_encoding_equals_comfyui(demo_workspace, case):
    name, crop = case.split("/")
    out = _encode(NAME, images()[name], crop)
    expected = FIXTURE["cases"][case]
    assert torch.allclose(out.image_embeds, torch.tensor(expected["image_embeds"]), atol=1e-5, rtol=0)
    for key in ("last_hidden_state", "penultimate_hidden_states"):
        tensor = out[key]
        assert list(tensor.shape) == expected[key]["shape"]
        assert torch.allclose(tensor.flatten()[::64], torch.tensor(expected[key]["every_64th"]), atol=1e-5, rtol=0)
    assert out.mm_projected is None and expected["mm_projected"] is None


def _open_clip_layout(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The demo file as an OpenCLIP checkpoint's visual tower (`visual.*`)."""
    vision = {
        "class_embedding": "embeddings.class_embedding",
        "conv1.weight": "embeddings.patch_embedding.weight",
        "ln_pre.weight": "pre_layrnorm.weight",
        "ln_pre.bias": "pre_layrnorm.bias",
        "ln_post.weight": "post_layernorm.weight",
        "ln_post.bias": "post_layernorm.bias",
    }
    inner = {k[len("vision_model.") :]: v for k, v in sd.items() if k.startswith("vision_model.")}
    out = {f"visual.{ours}": inner.pop(theirs) for ours, theirs in vision.items()}
    out.update({f"visual.{k}": v for k, v in clip_mod.hf_to_open_clip(inner).items()})
    out["visual.proj"] = sd["visual_projection.weight"].t().contiguous()
    return out


def test_open_clip_layout_loads_to_the_same_outputs(demo_workspace):
    folder = demo_workspace.models_dir / "clip_vision"
    save_file(_open_clip_layout(load_state_dict(folder / NAME)), str(folder / "open-clip-layout.safetensors"))
    try:
        image = images()["wide"]
        theirs, ours = _encode("open-clip-layout.safetensors", image, "center"), _encode(NAME, image, "center")
        for key in ("image_embeds", "last_hidden_state", "penultimate_hidden_states"):
            assert torch.equal(theirs[key], ours[key])
    finally:
        (folder / "open-clip-layout.safetensors").unlink()


def test_loader_refuses_other_files(demo_workspace):
    folder = demo_workspace.models_dir / "clip_vision"
    shutil.copy(demo_workspace.models_dir / "loras" / "sd1-tiny-lora.safetensors", folder / "lora.safetensors")
    try:
        with pytest.raises(ValueError, match="clip_name: 'lora.safetensors' is not a CLIP vision model"):
            CLIPVisionLoader().load_clip("lora.safetensors")
    finally:
        (folder / "lora.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="clip_name"):
        CLIPVisionLoader().load_clip("missing.safetensors")
