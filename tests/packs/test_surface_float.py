"""comfy.float.stochastic_rounding (GGUF bakes LoRA patches into float8 weights with it): the same seed gives
ComfyUI's bits, and the rounding is unbiased (fixture recorded on ComfyUI 0.3.64 by
scripts/record_comfyui_model_surface.py)."""

from __future__ import annotations

import pytest
import torch

from comfy_bridge.compat.comfy import float as cfloat

from .recorded import load, tensor

FIXTURE = load("comfyui_model_surface.json")["float"]


def value() -> torch.Tensor:
    n = 37 * 19
    return torch.sin(torch.arange(n, dtype=torch.float32) * 0.731).reshape(37, 19) * torch.linspace(
        0.001, 500.0, n
    ).reshape(37, 19)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("seed", [0, 1234])
def test_float8_rounding_gives_comfyuis_bits(name, seed):
    out = cfloat.stochastic_rounding(value(), getattr(torch, name), seed=seed)
    assert out.dtype == getattr(torch, name)
    torch.testing.assert_close(out.float(), tensor(FIXTURE[f"{name}/{seed}"]), rtol=0, atol=0)


def test_other_dtypes_are_a_plain_cast():
    out = cfloat.stochastic_rounding(value(), torch.bfloat16)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), tensor(FIXTURE["bfloat16"]), rtol=0, atol=0)
    assert cfloat.stochastic_rounding(value(), torch.float32).dtype == torch.float32


def test_rounding_is_unbiased_and_stays_on_the_grid():
    x = torch.full((4000, 1), 1.03)  # between the e4m3 neighbours 1.0 and 1.125
    out = cfloat.stochastic_rounding(x, torch.float8_e4m3fn, seed=5).float()
    assert set(out.unique().tolist()) == {1.0, 1.125}
    assert out.mean().item() == pytest.approx(1.03, abs=0.01)
    with pytest.raises(ValueError):
        cfloat.manual_stochastic_round_to_float8(x, torch.float16)
