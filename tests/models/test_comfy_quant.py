"""ComfyUI's quantized layers (`<layer>.comfy_quant`) read back as float weights: int8 tensorwise and row-wise, with
and without ConvRot, as comfy-kitchen writes them for ComfyUI (TensorWiseINT8Layout.quantize) and as the math says
(rows rotated group-wise by a normalized regular Hadamard matrix, then scaled to int8 per row)."""

from __future__ import annotations

import json

import pytest
import torch

from nodes.models import comfy_quant
from nodes.models.errors import ModelLoadError

pytest.importorskip("comfy_kitchen")


def config_tensor(config: dict) -> torch.Tensor:
    return torch.tensor(list(json.dumps(config).encode("utf-8")), dtype=torch.uint8)


def hadamard(size: int) -> torch.Tensor:
    """The regular Hadamard matrix of a power-of-4 size, normalized (the test's own construction)."""
    h4 = torch.tensor([[1, 1, 1, -1], [1, 1, -1, 1], [1, -1, 1, 1], [-1, 1, 1, 1]], dtype=torch.float64)
    h = h4
    while h.shape[0] < size:
        h = torch.kron(h, h4)
    return h / size**0.5


def test_convrot_int8_layer_is_unrotated_and_scaled_per_row() -> None:
    torch.manual_seed(0)
    rows, cols, group = 8, 32, 16
    w = torch.randn(rows, cols, dtype=torch.float64)
    h = hadamard(group)
    rotated = (w.reshape(rows, -1, group) @ h.T).reshape(rows, cols)
    scale = rotated.abs().amax(dim=1, keepdim=True) / 127.0
    q = torch.round(rotated / scale).clamp(-127, 127).to(torch.int8)
    sd = {
        "blk.0.weight": q,
        "blk.0.weight_scale": scale.float(),
        "blk.0.comfy_quant": config_tensor({"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": group}),
        "blk.0.bias": torch.ones(rows),
    }
    out = comfy_quant.dequantize(sd, None, torch.float32)
    assert set(out) == {"blk.0.weight", "blk.0.bias"}
    expected = ((q.double() * scale.float().double()).reshape(rows, -1, group) @ h).reshape(rows, cols)
    torch.testing.assert_close(out["blk.0.weight"].double(), expected, rtol=0, atol=1e-5)
    # and that is the original weight up to int8 rounding
    assert (out["blk.0.weight"].double() - w).abs().max() < scale.max() * 2


def test_comfy_kitchen_quantized_files_read_back_close_to_their_weights() -> None:
    from comfy_kitchen.tensor.int8 import TensorWiseINT8Layout

    torch.manual_seed(1)
    w = torch.randn(16, 64)
    for convrot, per_channel in ((True, True), (False, True), (False, False)):
        q, params = TensorWiseINT8Layout.quantize(
            w, is_weight=True, per_channel=per_channel, convrot=convrot, convrot_groupsize=16
        )
        config = {"format": "int8_tensorwise", **({"convrot": True, "convrot_groupsize": 16} if convrot else {})}
        sd = {"l.weight": q, "l.weight_scale": params.scale, "l.comfy_quant": config_tensor(config)}
        got = comfy_quant.dequantize(sd, None, torch.float32)["l.weight"]
        assert got.dtype == torch.float32
        step = float(params.scale.max())
        assert (got - w).abs().max() <= step, (convrot, per_channel)


def test_nested_params_object_is_read_as_comfyui_reads_it() -> None:
    torch.manual_seed(2)
    w = torch.randn(4, 16)
    h = hadamard(16)
    rotated = w.double() @ h.T
    scale = rotated.abs().amax(dim=1, keepdim=True) / 127.0
    q = torch.round(rotated / scale).to(torch.int8)
    nested = {"format": "int8_tensorwise", "params": {"convrot": True, "convrot_groupsize": 16}}
    sd = {"x.weight": q, "x.weight_scale": scale.float(), "x.comfy_quant": config_tensor(nested)}
    got = comfy_quant.dequantize(sd, None, torch.float32)["x.weight"].double()
    torch.testing.assert_close(got, (q.double() * scale.float().double()) @ h, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    ("sd", "message"),
    [
        (
            {"a.weight": torch.zeros(2, 4, dtype=torch.int8), "a.comfy_quant": config_tensor({"format": "nvfp4"})},
            "'nvfp4'",
        ),
        (
            {
                "a.weight": torch.zeros(2, 4, dtype=torch.int8),
                "a.comfy_quant": config_tensor({"format": "int8_tensorwise"}),
            },
            "weight_scale",
        ),
        (
            {
                "a.weight": torch.zeros(2, 24, dtype=torch.int8),
                "a.weight_scale": torch.ones(2, 1),
                "a.comfy_quant": config_tensor({"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": 16}),
            },
            "ConvRot groups of 16",
        ),
        (
            {"a.weight": torch.zeros(2, 4), "a.comfy_quant": torch.tensor([0xFF, 0x00], dtype=torch.uint8)},
            "a.comfy_quant",
        ),
    ],
)
def test_unreadable_layers_are_refused_with_the_layer_named(sd: dict, message: str) -> None:
    with pytest.raises(ModelLoadError, match=message) as info:
        comfy_quant.dequantize(sd, "/m/file.safetensors", torch.float32)
    assert "a." in str(info.value) and "/m/file.safetensors" in str(info.value)
