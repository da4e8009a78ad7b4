"""SD3.5 Large and Medium diffusion models load and compute what ComfyUI 0.3.64's MMDiT computes.

tests/models/fixtures/comfyui_sd35.json was recorded by scripts/record_comfyui_sd35.py: ComfyUI's own MMDiT
class, built with SD3.5 Large's features (RMS qk-norm in both streams) and SD3.5 Medium's (those plus the second
image self-attention `x_block.attn2` in its first blocks) at tiny widths, gave the key names and shapes; its
model detection configured the MMDiT that ran on seeded weights. Here the same weights are written as a
checkpoint in that layout (`model.diffusion_model.*`), detected, loaded by our loader and run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import probe
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_sd35.json").read_text())
VARIANTS = ("sd35_large", "sd35_medium")


def seeded_weights(shapes: dict[str, list[int]], seed: int) -> dict[str, torch.Tensor]:
    """The recording script's weights: one generator, keys in sorted order (RMS-norm scales near 1)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for key in sorted(shapes):
        t = torch.randn(shapes[key], generator=g)
        out[key] = 1.0 + 0.1 * t if key.endswith((".ln_q.weight", ".ln_k.weight")) else 0.05 * t
    return out


def inputs(case: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(case["seed"])
    shape = case["shape"]
    return (
        torch.randn(shape, generator=g),
        torch.randn(shape[0], case["tokens"], 64, generator=g),
        torch.randn(shape[0], 32, generator=g),
    )


@pytest.fixture(scope="module", params=VARIANTS)
def variant(request, tmp_path_factory):
    rec = FIXTURE[request.param]
    path = tmp_path_factory.mktemp(request.param) / f"{request.param}-tiny.safetensors"
    save_file(seeded_weights(rec["shapes"], rec["weights_seed"]), str(path))
    return request.param, rec, path, loader.load_diffusion_model(make_ref("diffusion_model", "sd3", [path]))


def test_real_layouts_have_the_features_of_each_model(variant):
    name, rec, _, _ = variant
    keys = rec["shapes"]
    assert "model.diffusion_model.joint_blocks.0.context_block.attn.ln_q.weight" in keys
    assert "model.diffusion_model.joint_blocks.2.x_block.attn.ln_k.weight" in keys
    dual = sorted({int(k.split(".")[3]) for k in keys if ".x_block.attn2.qkv.weight" in k})
    assert dual == ([0, 1] if name == "sd35_medium" else [])
    assert rec["detected"]["x_block_self_attn_layers"] == dual and rec["detected"]["qk_norm"] == "rms"


def test_sd35_is_detected_and_configured_as_comfyui_does(variant):
    _, rec, path, model = variant
    info = probe(path)
    assert (info.arch, info.kind, info.prefix) == ("sd3", "diffusion_model", "model.diffusion_model.")
    cfg = model.module.config
    assert cfg.num_layers == rec["detected"]["depth"] and cfg.qk_norm == "rms_norm"
    assert list(cfg.dual_attention_layers) == rec["detected"]["x_block_self_attn_layers"]
    assert cfg.pos_embed_max_size == rec["detected"]["pos_embed_max_size"]


@pytest.mark.parametrize("index", range(2))
def test_sd35_forward_equals_comfyui_mmdit(variant, index):
    _, rec, _, model = variant
    case = rec["cases"][index]
    x, context, y = inputs(case)
    with torch.no_grad():
        out = model.apply(x, torch.tensor(case["timesteps"]), {"context": context, "pooled": y})
    expected = tensor(case["out"])
    assert expected.abs().max() > 0.1  # a real output, not a degenerate one
    torch.testing.assert_close(out, expected, atol=2e-5, rtol=1e-4)
