"""GetICLoRAParameters against ComfyUI's newest module code (fixture by scripts/record_comfyui_iclora.py): the
factor each LoRA metadata header gives, read from the file the LoRA loader applied; LTXVAddGuide takes the result."""

from __future__ import annotations

import asyncio
import json
import struct
from pathlib import Path

import pytest
import torch

from cluster.refs import ModelRef, Patch
from nodes.library.ltxv_av import LTXVAddGuide
from nodes.library.ltxv_iclora import GetICLoRAParameters
from tests.recorded_tensors import load_json

FIXTURE = Path(__file__).parent / "fixtures" / "comfyui_iclora.json"


def _lora(path: Path, metadata: dict[str, str]) -> Patch:
    """A one-tensor LoRA file whose metadata header lists the keys in `metadata`'s order. safetensors' save_file
    writes them in hash order, which varies per run: with two keys that both end in reference_downscale_factor
    the first one decides, so the order must be the case's. (ComfyUI reads metadata through safetensors' map,
    whose order is not the file's either: its recorded answer for such a header is the file order's here.)"""
    data = torch.zeros(1, 2).numpy().tobytes()
    header: dict = {"__metadata__": metadata} if metadata else {}
    header["lora_unet_x.lora_down.weight"] = {"dtype": "F32", "shape": [1, 2], "data_offsets": [0, len(data)]}
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return Patch(str(path), "digest", 1.0)


def _model(*patches: Patch) -> ModelRef:
    return ModelRef("diffusion_model", "ltx2", ("base.safetensors",), ("d",), patches)


def test_parameters_equal_comfyuis_for_each_metadata(tmp_path: Path) -> None:
    cases = load_json(FIXTURE)["cases"]
    assert len(cases) >= 10
    for i, case in enumerate(cases):
        model = _model(_lora(tmp_path / f"l{i}.safetensors", case["metadata"]))
        assert GetICLoRAParameters().execute(model) == (case["parameters"],), case["metadata"]


def test_the_newest_lora_with_metadata_decides(tmp_path: Path) -> None:
    two = _lora(tmp_path / "two.safetensors", {"reference_downscale_factor": "2"})
    three = _lora(tmp_path / "three.safetensors", {"reference_downscale_factor": "3"})
    plain = _lora(tmp_path / "plain.safetensors", {})
    assert GetICLoRAParameters().execute(_model(two, three))[0] == {"reference_downscale_factor": 3}
    assert GetICLoRAParameters().execute(_model(three, two, plain))[0] == {"reference_downscale_factor": 2}
    assert GetICLoRAParameters().execute(_model())[0] == {"reference_downscale_factor": 1}


def test_add_guide_takes_the_parameters_and_refuses_a_downscaled_reference() -> None:
    optional = LTXVAddGuide.INPUT_TYPES()["optional"]
    assert optional["iclora_parameters"][0] == "IC_LORA_PARAMETERS" and optional["attention_mask"][0] == "MASK"
    cond = [[torch.zeros(1, 1, 4), {}]]
    call = LTXVAddGuide().execute(cond, cond, None, {}, None, 0, 1.0, None, {"reference_downscale_factor": 2})
    with pytest.raises(NotImplementedError, match="reference_downscale_factor 2"):
        asyncio.run(call)
