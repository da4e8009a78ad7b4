"""bf16 and fp16 text-encoder files (what users download: t5xxl_fp16, qwen_2.5_vl_7b bf16, qwen_3_4b bf16, ...)
encode as ComfyUI 0.3.64 encodes them on the CPU with its default flags: it computes every text encoder in float32
(the weights are cast per layer), so the conditioning equals ComfyUI's recorded one
(tests/models/fixtures/comfyui_text_encoder_dtypes.json.xz, recorded by scripts/record_comfyui_text_encoder_dtypes.py
on the demo's tiny T5-XXL and Qwen2.5-VL files cast to bf16 / fp16, as this test casts them)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from nodes.loaders import make_ref
from nodes.models import loader
from nodes.models.flux_demo import build_demo_flux
from nodes.models.qwen_image_demo import build_demo_qwen_image
from nodes.models.text_encoder_dtype import TEXT_ENCODER_COMPUTE_DTYPE, text_encoder_compute_dtype
from tests.node_calls import active_workspace
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_text_encoder_dtypes.json.xz")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    torch.set_num_threads(1)
    yield from active_workspace(tmp_path_factory.mktemp("te-dtypes-ws"), build_demo_flux, build_demo_qwen_image)


def cast_copy(source: Path, dtype: torch.dtype) -> Path:
    """`source` with every float tensor cast to `dtype`, its metadata kept, written beside it."""
    target = source.with_name(f"{source.stem}_{dtype}.safetensors".replace("torch.", ""))
    with safe_open(str(source), "pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
        metadata = f.metadata()
    cast = {k: (v.to(dtype) if v.is_floating_point() else v).contiguous() for k, v in tensors.items()}
    save_file(cast, str(target), metadata=metadata)
    return target


def test_the_recorded_comfyui_computes_in_float32_whatever_the_file_dtype() -> None:
    assert FIXTURE["text_encoder_dtype_cpu"] == "torch.float16"  # its default weight dtype on the CPU
    assert {case["compute_dtype"] for case in FIXTURE["cases"]} == {"torch.float32"}
    for file_dtype in (torch.bfloat16, torch.float16, torch.float32):
        assert text_encoder_compute_dtype(file_dtype) == TEXT_ENCODER_COMPUTE_DTYPE == torch.float32


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: f"{c['family']}-{c['file_dtype']}")
def test_conditioning_of_a_cast_file_equals_comfyuis(workspace, case) -> None:
    source = workspace.models_dir / case["file"]
    assert hashlib.sha256(source.read_bytes()).hexdigest() == FIXTURE["files"][case["file"]]
    path = cast_copy(source, DTYPES[case["file_dtype"]])
    encoder = loader.load_text_encoder(make_ref("text_encoder", case["clip_type"], [path], clip_type=case["clip_type"]))
    cond, _pooled = encoder.encode(encoder.tokenize(FIXTURE["prompt"]))
    assert cond.dtype == torch.float32
    torch.testing.assert_close(cond, tensor(case["cond"]), atol=1e-5, rtol=1e-5)
