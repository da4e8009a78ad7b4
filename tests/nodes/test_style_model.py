"""StyleModelLoader + StyleModelApply give ComfyUI's conditioning: the demo T2I-Adapter style model and a
tiny Flux Redux on the demo CLIP vision output, every strength type, against ComfyUI 0.3.64's own classes and
StyleModelApply node (tests/nodes/fixtures/comfyui_style_model.json, recorded by
scripts/record_comfyui_style_model.py); and a styled prompt renders through the engine."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from nodes.library.clip_vision import CLIPVisionEncode, CLIPVisionLoader
from nodes.library.style_model import StyleModelApply, StyleModelLoader

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from record_comfyui_style_model import CASES, conditioning, image, redux_weights  # noqa: E402

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_style_model.json").read_text())
STYLE = "sd1-tiny-style.safetensors"


@pytest.fixture(scope="module")
def style_models(demo_workspace) -> dict[str, object]:
    save_file(redux_weights(), str(demo_workspace.models_dir / "style_models" / "redux-tiny.safetensors"))
    (clip_vision,) = CLIPVisionLoader().load_clip("clip-vision-tiny.safetensors")
    encoded = asyncio.run(CLIPVisionEncode().encode(clip_vision, image(), "center"))[0]
    return {
        "t2i": StyleModelLoader().load_style_model(STYLE)[0],
        "redux": StyleModelLoader().load_style_model("redux-tiny.safetensors")[0],
        "encoded": encoded,
    }


def test_the_demo_style_model_is_the_recorded_one(demo_workspace):
    data = (demo_workspace.models_dir / "style_models" / STYLE).read_bytes()
    assert hashlib.sha256(data).hexdigest() == FIXTURE["style_model_sha256"]


@pytest.mark.parametrize("name, kind, strength, strength_type", CASES, ids=[c[0] for c in CASES])
def test_apply_equals_comfyui(style_models, name, kind, strength, strength_type):
    width = 32 if kind == "t2i" else 16
    (out,) = asyncio.run(
        StyleModelApply().apply_stylemodel(
            conditioning(name, width), style_models[kind], style_models["encoded"], strength, strength_type
        )
    )
    expected = FIXTURE["cases"][name]
    assert len(out) == len(expected)
    for (tensor, keys), want in zip(out, expected):
        assert list(tensor.shape) == want["shape"] and sorted(keys) == want["keys"]
        assert torch.allclose(tensor.flatten()[::8], torch.tensor(want["every_8th"]), atol=1e-5, rtol=0)
        if "attention_mask" in want:
            mask = keys["attention_mask"]
            assert (
                list(mask.shape) == want["attention_mask"]["shape"]
                and str(mask.dtype) == want["attention_mask"]["dtype"]
            )
            assert hashlib.sha256(mask.contiguous().numpy().tobytes()).hexdigest() == want["attention_mask"]["sha256"]
            assert list(keys["attention_mask_img_shape"]) == want["attention_mask_img_shape"]


def test_redux_with_an_attention_bias_is_refused(style_models):
    with pytest.raises(ValueError, match="strength_type: an attention bias on a Flux Redux style model"):
        asyncio.run(
            StyleModelApply().apply_stylemodel(
                conditioning("x", 16), style_models["redux"], style_models["encoded"], 0.5, "attn_bias"
            )
        )


def test_loader_refuses_other_files(demo_workspace):
    folder = demo_workspace.models_dir / "style_models"
    shutil.copy(demo_workspace.models_dir / "loras" / "sd1-tiny-lora.safetensors", folder / "lora.safetensors")
    try:
        with pytest.raises(ValueError, match="style_model_name: invalid style model 'lora.safetensors'"):
            StyleModelLoader().load_style_model("lora.safetensors")
    finally:
        (folder / "lora.safetensors").unlink()


def styled_prompt(strength: float = 1.0, strength_type: str = "multiply") -> dict:
    prompt = json.loads((REPO / "workflows_json" / "text_to_image.json").read_text())
    prompt["3"]["inputs"].update(steps=3)
    prompt["5"]["inputs"].update(width=64, height=64)
    prompt.update(
        {
            "20": {"class_type": "LoadImage", "inputs": {"image": "example.png"}},
            "21": {"class_type": "CLIPVisionLoader", "inputs": {"clip_name": "clip-vision-tiny.safetensors"}},
            "22": {
                "class_type": "CLIPVisionEncode",
                "inputs": {"clip_vision": ["21", 0], "image": ["20", 0], "crop": "center"},
            },
            "23": {"class_type": "StyleModelLoader", "inputs": {"style_model_name": STYLE}},
            "24": {
                "class_type": "StyleModelApply",
                "inputs": {
                    "conditioning": ["6", 0],
                    "style_model": ["23", 0],
                    "clip_vision_output": ["22", 0],
                    "strength": strength,
                    "strength_type": strength_type,
                },
            },
        }
    )
    prompt["3"]["inputs"]["positive"] = ["24", 0]
    return prompt


def test_style_changes_the_rendered_image(demo_workspace):
    from tests.e2e.test_samplers_on_executors import render_in_process

    plain = styled_prompt()
    plain["3"]["inputs"]["positive"] = ["6", 0]
    images = render_in_process(
        demo_workspace, {"plain": plain, "styled": styled_prompt(), "bias_1": styled_prompt(1.0, "attn_bias")}
    )
    assert not np.array_equal(images["styled"], images["plain"])
    # attn_bias at strength 1 appends the unscaled tokens, as multiply by 1 does
    assert np.array_equal(images["bias_1"], images["styled"])
