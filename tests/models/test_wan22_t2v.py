"""Wan 2.2 14B text-to-video's fp8-scaled experts (ComfyUI's wan2.2_t2v_{high,low}_noise_14B_fp8_scaled files)
checked against ComfyUI on wan-tiny's files in that layout.

tests/models/fixtures/comfyui_wan22_t2v.json was recorded by scripts/record_comfyui_wan22_t2v.py (upstream
ComfyUI 0.10.0's UNETLoader on the files nodes.models.wan_demo writes): each expert's raw output on seeded
inputs. The files are built here again (same seed, same bytes: the fixture's sha256 says so)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.detect import probe
from nodes.models.wan_demo import FILES, build_demo_wan
from tests.recorded_tensors import tensor

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "comfyui_wan22_t2v.json").read_text())
ATOL, RTOL = 1e-5, 1e-4


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("wan22_t2v") / "models"
    build_demo_wan(root)
    return root


def test_demo_files_are_the_recorded_ones(models) -> None:
    for part, rec in FIXTURE["files"].items():
        digest = hashlib.sha256((models / FILES[part]).read_bytes()).hexdigest()
        assert digest == rec["sha256"], f"{FILES[part]} changed: re-record {FIXTURE['recorded_by']}"


@pytest.mark.parametrize("part", ["t2v_high", "t2v_low"])
def test_files_are_scaled_fp8_and_detected_as_wan(models, part: str) -> None:
    path = models / FILES[part]
    with safe_open(str(path), "pt") as f:
        keys = set(f.keys())
        assert f.get_slice("scaled_fp8").get_dtype() == "F8_E4M3"
        assert f.get_slice("blocks.0.self_attn.q.weight").get_dtype() == "F8_E4M3"
        assert {"blocks.0.self_attn.q.scale_weight", "blocks.0.self_attn.q.scale_input"} <= keys
        assert f.get_slice("patch_embedding.weight").get_shape()[1] == 16  # text-to-video: noise only
    info = probe(path)
    assert (info.arch, info.kind, info.layout) == ("wan21", "diffusion_model", "wan")


@pytest.mark.parametrize("index", range(len(FIXTURE["transformer"])))
def test_forward_equals_comfyuis(models, index: int) -> None:
    case = FIXTURE["transformer"][index]
    path = models / FILES[case["model"]]
    model = loader.load_diffusion_model(make_ref("diffusion_model", probe(path).arch, [path]))
    assert model.config["in_channels"] == 16 and "image_dim" not in model.config
    out = model.apply(tensor(case["x"]), torch.tensor(case["t"]), {"context": tensor(case["context"])})
    torch.testing.assert_close(out, tensor(case["out"]), atol=ATOL, rtol=RTOL)
