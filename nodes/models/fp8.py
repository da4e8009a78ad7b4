"""ComfyUI's "scaled fp8" weight files (e.g. text_encoders/qwen_2.5_vl_7b_fp8_scaled.safetensors): a linear
layer's weight stored as float8 with a float32 `scale_weight` beside it (and an unused `scale_input`), the file
marked by a `scaled_fp8` tensor of the fp8 dtype. ComfyUI multiplies weight and scale at run time; the loaders
here take the product once, in float32. Plain float8 files (no scales) need nothing: loading casts them exactly."""

from __future__ import annotations

from collections.abc import Mapping

import torch

MARKER = "scaled_fp8"
_SCALES = (".scale_weight", ".scale_input")


def dequantize_scaled_fp8(sd: Mapping[str, torch.Tensor], round_bias: bool = True) -> dict[str, torch.Tensor]:
    """The state dict with each scaled layer (an `X.scale_weight` beside `X.weight`) as ComfyUI computes it, in
    float32: the weight rounded to the file's fp8 dtype times the scale, the bias rounded to that dtype too
    (ComfyUI 0.3's scaled fp8 ops build the whole layer in it) unless `round_bias` is False (ComfyUI 0.10's
    mixed-precision ops, which hold the bias in the compute dtype); the scales and the marker are left out.
    A state dict without scales comes back as it is."""
    if not any(k.endswith(_SCALES) for k in sd):
        return dict(sd)
    marker = next((t for k, t in sd.items() if k == MARKER or k.endswith("." + MARKER)), None)
    fp8 = marker.dtype if marker is not None else torch.float8_e4m3fn
    scaled = {k[: -len("scale_weight")] for k in sd if k.endswith(".scale_weight")}
    out: dict[str, torch.Tensor] = {}
    for key, t in sd.items():
        if key == MARKER or key.endswith("." + MARKER) or key.endswith(_SCALES):
            continue
        layer, _, name = key.rpartition(".")
        if layer + "." not in scaled or name not in ("weight", "bias"):
            out[key] = t
            continue
        if name == "bias":
            out[key] = (t.to(fp8) if round_bias else t).to(torch.float32)
        else:
            out[key] = t.to(fp8).to(torch.float32) * sd[layer + ".scale_weight"].to(torch.float32)
    return out
