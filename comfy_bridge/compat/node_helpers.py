"""`node_helpers`: small helpers node packs share (PIL retries, conditioning edits, hashing)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from PIL import Image, ImageFile, UnidentifiedImageError


def conditioning_set_values(conditioning: list, values: dict | None = None, append: bool = False) -> list:
    """A copy of `conditioning` with `values` set (or appended to lists) in every entry's options dict."""
    out = []
    for cond, options in conditioning:
        options = options.copy()
        for key, value in (values or {}).items():
            if append and key in options:
                options[key] = options[key] + value
            else:
                options[key] = value
        out.append([cond, options])
    return out


def pillow(fn: Callable, arg: Any) -> Any:
    """Call a PIL function, retrying with truncated images allowed (as ComfyUI does)."""
    prev = ImageFile.LOAD_TRUNCATED_IMAGES
    try:
        return fn(arg)
    except (OSError, UnidentifiedImageError, ValueError):
        ImageFile.LOAD_TRUNCATED_IMAGES = True
        return fn(arg)
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = prev


def hasher() -> Callable:
    return hashlib.sha256


def string_to_torch_dtype(string: str) -> Any:
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}.get(string)


def image_alpha_fix(destination: Any, source: Any) -> tuple:
    if destination.shape[-1] < source.shape[-1]:
        source = source[..., : destination.shape[-1]]
    elif destination.shape[-1] > source.shape[-1]:
        import torch

        pad = torch.ones((*source.shape[:-1], destination.shape[-1] - source.shape[-1]), device=source.device)
        source = torch.cat([source, pad], dim=-1)
    return destination, source


__all__ = ["conditioning_set_values", "pillow", "hasher", "string_to_torch_dtype", "image_alpha_fix", "Image"]
