"""ComfyUI's per-layer quantized weights (`<layer>.comfy_quant`), read into float weights at load.

ComfyUI's quantized files (the `*_int8_convrot`, `*_w4a8` names of the newest templates: LTX-2.5, MiniMax H3,
Qwen Image 2.1) keep a linear layer's `weight` as integer codes and put beside it a `<layer>.comfy_quant` byte
tensor holding a JSON object whose `format` names the layout (comfy/quant_ops.py QUANT_ALGOS), plus the layout's
scale tensors. ComfyUI's ops (comfy/ops.py, mixed-precision `_load_from_state_dict`) hand them to comfy-kitchen's
layouts; here the same comfy-kitchen layouts dequantize each layer once at load, so the models compute on float
weights as for any other file:

- `int8_tensorwise`: int8 `weight`, float32 `weight_scale` (one scalar, or one per output row). With
  `"convrot": true` the rows were rotated group-wise by a Hadamard matrix of `convrot_groupsize` (default 256)
  before quantizing; comfy-kitchen undoes it. ComfyUI also reads both keys from a nested `params` object.
- `asym_w4a8_int8`: 4-bit codes with fp8 group scales (nodes/models/qwen35_text.py).
- `float8_e4m3fn` / `float8_e5m2` (the `*_fp8mixed` files, e.g. Chroma1-HD-fp8mixed): an fp8 `weight` and a float32
  `weight_scale`, the weight being their product (comfy/quant_ops.py TensorCoreFP8Layout); `input_scale` only
  scales activations on fp8 hardware, so it is dropped.

Any other format is refused with the layer named."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import torch

from nodes.models.errors import ModelLoadError

MARKER = "comfy_quant"
INT8 = "int8_tensorwise"
W4A8 = "asym_w4a8_int8"
W4A8_TENSORS = ("weight_s_rel", "weight_s_channel", "weight_codebook", "weight_correction")
FP8 = {"float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}
DEFAULT_CONVROT_GROUP = 256  # ComfyUI's default when a layer's JSON leaves it out


def is_quantized(keys) -> bool:
    """Whether a state dict (or its keys) has any ComfyUI-quantized layer."""
    return any(k.endswith("." + MARKER) for k in keys)


def layer_config(raw: torch.Tensor) -> dict[str, Any]:
    """The JSON object of one `<layer>.comfy_quant` tensor (uint8 or int8 bytes)."""
    config = json.loads(bytes(raw.flatten().to(torch.uint8).tolist()).decode("utf-8"))
    if not isinstance(config, dict):
        raise ValueError(f"comfy_quant is {type(config).__name__}, not an object")
    return config


def _option(config: Mapping[str, Any], name: str, default: Any) -> Any:
    params = config.get("params")
    nested = params if isinstance(params, dict) else {}
    return config.get(name, nested.get(name, default))


def dequantize_int8(weight: torch.Tensor, scale: torch.Tensor, config: Mapping[str, Any], dtype: torch.dtype):
    """One `int8_tensorwise` layer's float weight, by comfy-kitchen's TensorWiseINT8Layout as ComfyUI uses it."""
    try:
        from comfy_kitchen.tensor.int8 import TensorWiseINT8Layout
    except ImportError as e:  # comfy-kitchen is installed on Linux and Windows only
        raise ValueError(f"int8 quantized weights need comfy-kitchen, which is not installed here ({e})") from None

    if weight.dtype != torch.int8:
        raise ValueError(f"weight is {weight.dtype}, not int8")
    scale = scale.to(torch.float32)
    if scale.numel() not in (1, weight.shape[0]):
        raise ValueError(f"weight_scale has {scale.numel()} values for {weight.shape[0]} rows")
    convrot = bool(_option(config, "convrot", False))
    group = int(_option(config, "convrot_groupsize", DEFAULT_CONVROT_GROUP))
    if convrot and weight.shape[-1] % group:
        raise ValueError(f"{weight.shape[-1]} columns do not split into ConvRot groups of {group}")
    params = TensorWiseINT8Layout.Params(
        scale=scale.reshape(-1, 1) if scale.numel() > 1 else scale.reshape(()),
        orig_dtype=dtype,
        orig_shape=tuple(weight.shape),
        is_weight=True,
        convrot=convrot,
        convrot_groupsize=group,
    )
    return TensorWiseINT8Layout.dequantize(weight.contiguous(), params)


def dequantize(sd: Mapping[str, torch.Tensor], path: str | None, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The state dict with every quantized layer's weight dequantized to `dtype` and its extra tensors gone."""
    out = dict(sd)
    for key in [k for k in sd if k.endswith("." + MARKER)]:
        layer = key[: -len(MARKER)]
        try:
            config = layer_config(out.pop(key))
        except (ValueError, UnicodeDecodeError) as e:
            raise ModelLoadError(path, f"{key}: not a readable quantization config ({e})") from None
        fmt = config.get("format")
        try:
            if fmt == INT8:
                out[layer + "weight"] = dequantize_int8(
                    out[layer + "weight"], out.pop(layer + "weight_scale"), config, dtype
                )
            elif fmt in FP8:
                weight, scale = out[layer + "weight"], out.pop(layer + "weight_scale").to(torch.float32)
                if weight.dtype != FP8[fmt]:
                    raise ValueError(f"weight is {weight.dtype}, not {FP8[fmt]}")
                out.pop(layer + "input_scale", None)
                out[layer + "weight"] = (weight.to(torch.float32) * scale).to(dtype)
            elif fmt == W4A8:
                from nodes.models.qwen35_text import dequantize_w4a8

                tensors = {n: out.pop(layer + n) for n in ("weight", *W4A8_TENSORS) if layer + n in out}
                out[layer + "weight"] = dequantize_w4a8(tensors, config, dtype)
            else:
                raise ModelLoadError(
                    path, f"{layer}weight is quantized as {fmt!r}; only {INT8}, {W4A8} and {', '.join(FP8)} are read"
                )
        except KeyError as e:
            raise ModelLoadError(path, f"{layer}weight ({fmt}): the file has no {e.args[0]}") from None
        except (ValueError, RuntimeError) as e:
            raise ModelLoadError(path, f"{layer}weight: not a readable {fmt} layer ({e})") from None
    return out
