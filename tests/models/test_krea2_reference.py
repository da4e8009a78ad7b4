"""Krea 2 with a reference picture (the Krea 2 Turbo style-reference template) against today's ComfyUI module code on
the tiny demo files (scripts/record_comfyui_krea2_reference.py): the DiT with reference latents placed by index at
timestep zero, by index, and without a method (unused), and Krea 2's text encoder reading a picture in
TextEncodeQwenImageEditPlus's prompt and in its own template, all within 1e-5."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.krea2_demo import FILE, TEXT_FILE, build_demo_krea2
from nodes.models.qwen_image_text import TEMPLATE_EDIT
from tests.recorded_tensors import load_json, tensor

FIXTURE = Path(__file__).parent / "fixtures" / "comfyui_krea2_reference.json"


@pytest.fixture(scope="module")
def record() -> dict:
    return load_json(FIXTURE)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("krea2_reference")
    build_demo_krea2(root)
    return root


def test_recorded_on_these_files(record, models):
    from scripts.comfyui_recording import sha256

    assert record["files"] == {"dit": sha256(str(models / FILE)), "text": sha256(str(models / TEXT_FILE))}


def test_dit_with_reference_latents(record, models):
    model = loader.load_diffusion_model(make_ref("diffusion_model", "krea2", [models / FILE]))
    width = model.config["num_text_layers"] * model.config["text_hidden_dim"]
    with torch.no_grad():
        for case in record["dit"]:
            gen = torch.Generator().manual_seed(case["seed"])
            x = torch.randn(1, 16, *case["shape"], generator=gen)
            context = torch.randn(1, 7, width, generator=gen)
            refs = [torch.randn(1, 16, h, w, generator=gen) for h, w in case["refs"]]
            cond = {"context": context, "ref_latents": refs, "ref_latents_method": case["method"]}
            got = model.apply(x, torch.tensor([case["sigma"]]), cond)
            want = tensor(case["out"])
            assert got.shape == want.shape
            assert (got - want).abs().max() < 1e-5, case
            plain = model.apply(x, torch.tensor([case["sigma"]]), {"context": context})
            # the references change the image unless no method places them (ComfyUI then leaves them out)
            assert torch.equal(plain, got) == (case["method"] is None)


def test_text_encoder_reads_the_picture(record, models):
    ref = make_ref("text_encoder", "krea2", [models / TEXT_FILE], clip_type="krea2")
    encoder = loader.load_text_encoder(ref)
    prompts = {
        "edit_plus": encoder.tokenize(
            "Picture 1: <|vision_start|><|image_pad|><|vision_end|>cute", images=1, template=TEMPLATE_EDIT
        ),
        "krea2_template": encoder.tokenize("a yeti reading", images=1),
    }
    for case in record["text"]:
        tokens = prompts[case["name"]]
        assert tokens == encoder.tokenize(case["chat"], images=1)  # the chat text ComfyUI tokenized
        gen = torch.Generator().manual_seed(case["image"]["seed"])
        picture = torch.rand(1, *case["image"]["shape"], 3, generator=gen)
        got, _ = encoder.encode(tokens, [picture])
        want = tensor(case["cond"])
        assert got.shape == want.shape, case["name"]
        assert (got - want).abs().max() < 1e-5, case["name"]
