"""Today's ComfyUI Resize Image/Mask (`comfy_extras.nodes_post_processing`, added after 0.3.64): one node that
resizes an image or a mask in nine ways, chosen with a dynamic combo whose option brings its own inputs."""

from __future__ import annotations

import math
from typing import Any

import torch

from nodes import MAX_RESOLUTION
from nodes.dynamic_inputs import DynamicSection, combo_inputs, dynamic_combo, match_type
from nodes.upscale import common_upscale

SCALE_METHODS = ["nearest-exact", "bilinear", "area", "bicubic", "lanczos"]
CROP = (
    "COMBO",
    {
        "default": "center",
        "multiselect": False,
        "options": ["disabled", "center"],
        "tooltip": "disabled: stretch to the new size; center: keep the aspect ratio, cut the overhang.",
    },
)


def _size(tooltip: str) -> tuple:
    return ("INT", {"default": 512, "min": 0, "max": MAX_RESOLUTION, "step": 1, "tooltip": tooltip})


OPTIONS: dict[str, dict[str, tuple]] = {
    "scale dimensions": {
        "width": _size("Width in pixels; 0 follows the height, keeping the aspect ratio."),
        "height": _size("Height in pixels; 0 follows the width, keeping the aspect ratio."),
        "crop": CROP,
    },
    "scale by multiplier": {
        "multiplier": (
            "FLOAT",
            {"default": 1.0, "min": 0.01, "max": 8.0, "step": 0.01, "tooltip": "Both sides times this."},
        )
    },
    "scale longer dimension": {"longer_size": _size("The longer side becomes this; the aspect ratio is kept.")},
    "scale shorter dimension": {"shorter_size": _size("The shorter side becomes this; the aspect ratio is kept.")},
    "scale width": {"width": _size("The width becomes this; the height follows the aspect ratio.")},
    "scale height": {"height": _size("The height becomes this; the width follows the aspect ratio.")},
    "scale total pixels": {
        "megapixels": (
            "FLOAT",
            {
                "default": 1.0,
                "min": 0.01,
                "max": 16.0,
                "step": 0.01,
                "tooltip": "Millions of pixels (of 1024x1024); the aspect ratio is kept.",
            },
        )
    },
    "match size": {"match": ("IMAGE,MASK", {"tooltip": "An image or mask whose size the result takes."}), "crop": CROP},
    "scale to multiple": {
        "multiple": (
            "INT",
            {
                "default": 8,
                "min": 1,
                "max": MAX_RESOLUTION,
                "step": 1,
                "tooltip": "Both sides become multiples of this (the image is scaled to cover, then cut centred).",
            },
        )
    },
}
RESIZE_TYPE = dynamic_combo(OPTIONS, tooltip="How the new size is chosen.")


def _resize(x: torch.Tensor, width: int, height: int, method: str, crop: str = "disabled") -> torch.Tensor:
    """An image [N,H,W,C] or mask [N,H,W] resized to width x height."""
    image = x.ndim == 4
    planes = x.movedim(-1, 1) if image else x.unsqueeze(1)
    out = common_upscale(planes, width, height, method, crop)
    return out.movedim(1, -1) if image else out.squeeze(1)


def _hw(x: torch.Tensor) -> tuple[int, int]:
    return (x.shape[1], x.shape[2])


def _aspect(x: torch.Tensor, width: int, height: int, method: str, crop: str = "disabled") -> torch.Tensor:
    """width x height, a 0 side following the other with the aspect ratio kept; both 0 leaves x as it is."""
    h, w = _hw(x)
    if width == 0 and height == 0:
        return x
    if width == 0:
        width = max(1, round(w * height / h))
    elif height == 0:
        height = max(1, round(h * width / w))
    return _resize(x, width, height, method, crop)


def _edge(x: torch.Tensor, size: int, method: str, longer: bool) -> torch.Tensor:
    h, w = _hw(x)
    if h == w:
        return _resize(x, size, size, method)
    if (h > w) == longer:  # the height is the side that becomes `size`
        return _resize(x, round(w / h * size), size, method)
    return _resize(x, size, round(h / w * size), method)


def _total_pixels(x: torch.Tensor, megapixels: float, method: str) -> torch.Tensor:
    h, w = _hw(x)
    scale = math.sqrt(int(megapixels * 1024 * 1024) / (w * h))
    return _resize(x, round(w * scale), round(h * scale), method)


def _to_multiple(x: torch.Tensor, multiple: int, method: str) -> torch.Tensor:
    """Scale so both sides cover the nearest lower multiples, then cut the overhang centred."""
    h, w = _hw(x)
    target_w, target_h = w // multiple * multiple, h // multiple * multiple
    if multiple <= 1 or target_w == 0 or target_h == 0 or (target_w, target_h) == (w, h):
        return x
    if target_w / w >= target_h / h:
        scaled_w, scaled_h = target_w, max(target_h, math.ceil(h * target_w / w))
    else:
        scaled_w, scaled_h = max(target_w, math.ceil(w * target_h / h)), target_h
    out = _resize(x, scaled_w, scaled_h, method)
    x0, y0 = (scaled_w - target_w) // 2, (scaled_h - target_h) // 2
    return out[:, y0 : y0 + target_h, x0 : x0 + target_w]


def resize(x: torch.Tensor, mode: str, method: str, p: dict[str, Any]) -> torch.Tensor:
    if mode == "scale dimensions":
        return _aspect(x, p["width"], p["height"], method, p["crop"])
    if mode == "scale by multiplier":
        h, w = _hw(x)
        return _resize(x, round(w * p["multiplier"]), round(h * p["multiplier"]), method)
    if mode in ("scale longer dimension", "scale shorter dimension"):
        longer = mode == "scale longer dimension"
        return _edge(x, p["longer_size" if longer else "shorter_size"], method, longer)
    if mode == "scale width":
        return _aspect(x, p["width"], 0, method)
    if mode == "scale height":
        return _aspect(x, 0, p["height"], method)
    if mode == "scale total pixels":
        return _total_pixels(x, p["megapixels"], method)
    if mode == "match size":
        h, w = _hw(p["match"])
        return _resize(x, w, h, method, p["crop"])
    if mode == "scale to multiple":
        return _to_multiple(x, p["multiple"], method)
    raise ValueError(f"Resize Image/Mask: unknown resize_type {mode!r} (one of {', '.join(OPTIONS)})")


class ResizeImageMaskNode:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_post_processing"
    FUNCTION = "execute"
    CATEGORY = "transform"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": DynamicSection(
                {
                    "input": match_type("input_type", "IMAGE,MASK"),
                    "resize_type": RESIZE_TYPE,
                    "scale_method": (
                        "COMBO",
                        {
                            "default": "area",
                            "multiselect": False,
                            "options": SCALE_METHODS,
                            "tooltip": "area suits shrinking, lanczos enlarging, nearest-exact pixel art.",
                        },
                    ),
                }
            )
        }

    RETURN_TYPES = (match_type("input_type")[0],)
    RETURN_NAMES = ("resized",)
    OUTPUT_TOOLTIPS = (None,)
    OUTPUT_MATCHTYPES = ("input_type",)
    SEARCH_ALIASES = [
        "resize",
        "resize image",
        "resize mask",
        "scale",
        "scale image",
        "scale mask",
        "image resize",
        "change size",
        "dimensions",
        "shrink",
        "enlarge",
    ]
    DESCRIPTION = (
        "Resizes an image or a mask: to a size, by a factor, by one side, to a pixel count, to another "
        "image's size or to multiples of a number."
    )

    def execute(self, input: torch.Tensor, resize_type: str, scale_method: str, **kwargs: Any):
        return (resize(input, resize_type, scale_method, combo_inputs(kwargs, "resize_type")),)


NODE_CLASS_MAPPINGS = {"ResizeImageMaskNode": ResizeImageMaskNode}
NODE_DISPLAY_NAME_MAPPINGS = {"ResizeImageMaskNode": "Resize Image/Mask"}
