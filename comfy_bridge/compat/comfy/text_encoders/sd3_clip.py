"""`comfy.text_encoders.sd3_clip`: ComfyUI's SD3 text encoder classes (CLIP-L + CLIP-G + T5-XXL). Packs check
a CLIP's encoder against them; building an encoder refuses: text encoders run on the executors, and a CLIP here
is a reference to its weights (encode with CLIP.encode_from_tokens / nodes.CLIPTextEncode). The tokenizers are
real (comfy.tokenizers)."""

from __future__ import annotations

from typing import Any

from comfy_bridge.compat.comfy.text_encoder_classes import refusing_class
from comfy_bridge.compat.comfy.tokenizers import SD3Tokenizer, T5XXLTokenizer
from comfy_bridge.packs.origin import UnsupportedFeature

MODULE = "comfy.text_encoders.sd3_clip"


T5XXLModel = refusing_class(MODULE, "T5XXLModel")
SD3ClipModel = refusing_class(MODULE, "SD3ClipModel")


def t5_xxl_detect(state_dict: dict, prefix: str = "") -> dict:
    """dtype_t5 (and t5xxl_scaled_fp8) of a T5-XXL state dict, as ComfyUI reads them."""
    out: dict = {}
    weight = state_dict.get(f"{prefix}encoder.final_layer_norm.weight")
    if weight is not None:
        out["dtype_t5"] = weight.dtype
    if f"{prefix}scaled_fp8" in state_dict:
        out["t5xxl_scaled_fp8"] = state_dict[f"{prefix}scaled_fp8"].dtype
    return out


def sd3_clip(*args: Any, **kwargs: Any) -> type:
    raise UnsupportedFeature("comfy.text_encoders.sd3_clip.sd3_clip", "text encoders are built on the executors")


__all__ = ["T5XXLModel", "T5XXLTokenizer", "SD3Tokenizer", "SD3ClipModel", "t5_xxl_detect", "sd3_clip"]
