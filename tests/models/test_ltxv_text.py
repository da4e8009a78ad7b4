"""LTX-Video 0.9's text encoder (CLIPLoader type ltxv on a T5-XXL file) checked against ComfyUI 0.3.64 on the tiny
T5 (flux-tiny-t5): the tokens (padded to 128), the conditioning and the attention mask beside it equal ComfyUI's for
the LTX-Video templates' prompts and a weighted one (tests/models/fixtures/comfyui_ltxv_workflows.json.xz, recorded by
scripts/record_comfyui_ltxv_workflows.py); CLIPTextEncode carries the mask into the conditioning."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.flux_demo import build_demo_flux
from tests.node_calls import active_workspace
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_ltxv_workflows.json.xz")
T5 = "text_encoders/flux-tiny-t5.safetensors"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """An active workspace holding flux-tiny's files (its T5 among them)."""
    torch.set_num_threads(1)
    yield from active_workspace(tmp_path_factory.mktemp("ltxv-text-ws"), build_demo_flux)


@pytest.mark.parametrize("case", FIXTURE["text"], ids=lambda c: c["prompt"][:20])
def test_tokens_conditioning_and_mask_equal_comfyuis(workspace, case) -> None:
    encoder = loader.load_text_encoder(make_ref("text_encoder", "ltxv", [workspace.models_dir / T5], clip_type="ltxv"))
    assert encoder.arch == "ltxv"
    tokens = encoder.tokenize(case["prompt"])
    assert [[[t, w] for t, w in window] for window in tokens["t5xxl"]] == case["tokens"]
    cond, pooled = encoder.encode(tokens)
    assert pooled is None
    torch.testing.assert_close(cond, tensor(case["cond"]), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(encoder.extras(tokens)["attention_mask"].float(), tensor(case["attention_mask"]))


def test_clip_text_encode_puts_the_mask_beside_the_conditioning(workspace) -> None:
    from nodes.loaders import CLIPLoader
    from nodes.model_nodes import CLIPTextEncode

    (clip,) = CLIPLoader().load_clip("flux-tiny-t5.safetensors", "ltxv")
    case = FIXTURE["text"][0]
    ((cond, extra),) = asyncio.run(CLIPTextEncode().encode(clip, case["prompt"]))[0]
    torch.testing.assert_close(cond, tensor(case["cond"]), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(extra["attention_mask"].float(), tensor(case["attention_mask"]))
    assert extra["attention_mask"].sum() < extra["attention_mask"].numel()  # the padding is masked
