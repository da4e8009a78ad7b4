"""`comfy.float`: casting weights to a lower precision. stochastic_rounding rounds to float8 up or down at
random, with probability proportional to the distance (so the rounding error is zero on average), using a
generator seeded with `seed` and drawn in the same order as ComfyUI (so the same seed gives the same bits);
other dtypes are a plain cast. GGUF uses it when it bakes LoRA patches into quantised weights."""

from __future__ import annotations

import torch

_FLOAT8 = {torch.float8_e4m3fn: (4, 3, 7), torch.float8_e5m2: (5, 2, 15)}  # exponent bits, mantissa bits, bias
_SLICE_ELEMENTS = 4096 * 4096


def manual_stochastic_round_to_float8(
    x: torch.Tensor, dtype: torch.dtype, generator: torch.Generator | None = None
) -> torch.Tensor:
    """x rounded stochastically onto dtype's float8 grid, returned in float16 (clamped to dtype's range)."""
    if dtype not in _FLOAT8:
        raise ValueError(f"stochastic rounding to float8 needs float8_e4m3fn or float8_e5m2, not {dtype}")
    exp_bits, man_bits, bias = _FLOAT8[dtype]
    x = x.half()
    magnitude = x.abs()
    sign = torch.where(magnitude == 0, 0, torch.sign(x))
    exponent = torch.clamp(torch.floor(torch.log2(magnitude)) + bias, 0, 2**exp_bits - 1)
    normal = exponent != 0
    # The mantissa in units of its last float8 bit (subnormals: of the smallest subnormal), plus U[0, 1),
    # floored: rounds up with probability equal to the fractional part.
    scaled = torch.where(
        normal,
        (magnitude / (2.0 ** (exponent - bias)) - 1.0) * (2**man_bits),
        magnitude / (2.0 ** (-bias + 1 - man_bits)),
    )
    scaled = scaled + torch.rand(
        scaled.size(), dtype=scaled.dtype, layout=scaled.layout, device=scaled.device, generator=generator
    )
    mantissa = scaled.floor() / (2**man_bits)
    value = sign * torch.where(normal, (2.0 ** (exponent - bias)) * (1.0 + mantissa), (2.0 ** (-bias + 1)) * mantissa)
    info = torch.finfo(dtype)
    return value.clamp(min=info.min, max=info.max)


def stochastic_rounding(value: torch.Tensor, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """value cast to dtype; float8 targets are rounded stochastically (seeded), in row slices of about 16M
    elements as ComfyUI does (the slicing decides the random draws, so it is kept)."""
    if dtype not in _FLOAT8:
        return value.to(dtype=dtype)
    generator = torch.Generator(device=value.device)
    generator.manual_seed(seed)
    out = torch.empty_like(value, dtype=dtype)
    slices = max(1, value.numel() / _SLICE_ELEMENTS)
    step = max(1, round(value.shape[0] / slices))
    for start in range(0, value.shape[0], step):
        out[start : start + step].copy_(
            manual_stochastic_round_to_float8(value[start : start + step], dtype, generator=generator)
        )
    return out


__all__ = ["stochastic_rounding", "manual_stochastic_round_to_float8"]
