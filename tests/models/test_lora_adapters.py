"""LyCORIS's LoHa and LoKr modules, full differences (`.diff`) and bias differences (`.diff_b`) merge as ComfyUI
0.10.0's weight adapters compute them (comfy/weight_adapter/loha.py, lokr.py; comfy/lora.py's diff patches): LoHa
with and without alpha, LoKr with a full or a factorised w1 (alpha over the factorised side's rank) and with both
sides full (alpha ignored), a bias difference beside a LoRA pair and alone, at
strengths 1 and 0.7, every weight within 1e-6 of ComfyUI's ModelPatcher on the same tensors
(tests/models/fixtures/comfyui_lora_adapters.json.xz, scripts/record_comfyui_lora_adapters.py). Their
CP-decomposed and DoRA forms are refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from cluster.refs import Patch
from nodes.models.errors import ModelLoadError
from nodes.models.lora import LoraTargets, merge_loras
from tests.recorded_tensors import load_json, tensor

FIXTURE = load_json(Path(__file__).parent / "fixtures" / "comfyui_lora_adapters.json")
WEIGHTS = {k: tensor(v) for k, v in FIXTURE["weights"].items()}


def targets() -> LoraTargets:
    names = [k[: -len(".weight")] for k in WEIGHTS if k.endswith(".weight")]
    t = LoraTargets(tuple(names), {})
    for name in names:
        t.add(name + ".weight", name)
    return t


def lora_file(tmp_path: Path, tensors: dict[str, torch.Tensor]) -> str:
    path = tmp_path / "adapters.safetensors"
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path))
    return str(path)


@pytest.mark.parametrize("index", range(len(FIXTURE["cases"])))
def test_merged_weights_equal_comfyuis(tmp_path, index: int) -> None:
    case = FIXTURE["cases"][index]
    path = lora_file(tmp_path, {k: tensor(v) for k, v in FIXTURE["lora"].items()})
    merged, count = merge_loras((Patch(path, f"adapters-{index}", case["strength"]),), targets(), WEIGHTS)
    assert count == len(targets().names)
    for key, entry in case["patched"].items():
        expected = tensor(entry)
        if key == "bias_only.weight":  # a bias difference alone leaves the weight
            assert torch.equal(expected, WEIGHTS[key]) and torch.equal(merged[key], WEIGHTS[key])
            continue
        assert (expected - WEIGHTS[key]).abs().max() > 1e-3, key  # ComfyUI changed every other tensor
        assert (merged[key] - expected).abs().max() <= 1e-6, (key, (merged[key] - expected).abs().max())


@pytest.mark.parametrize("part", ["hada_t1", "dora_scale"])
def test_forms_not_merged_are_refused_by_name(tmp_path, part: str) -> None:
    lora = {k: tensor(v) for k, v in FIXTURE["lora"].items() if k.startswith("loha.")}
    lora[f"loha.{part}"] = torch.ones(3, 3, 1, 1) if part == "hada_t1" else torch.ones(12, 1)
    path = lora_file(tmp_path, lora)
    with pytest.raises(ModelLoadError, match=f"loha has {part}"):
        merge_loras((Patch(path, f"refused-{part}", 1.0),), targets(), WEIGHTS)
