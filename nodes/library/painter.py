"""Today's ComfyUI Painter (`comfy_extras.nodes_painter`, added after 0.3.64): the web UI's painting widget
uploads what was painted as an RGBA image; the node lays it over a base image (or a plain background) and
gives the painted coverage (the alpha) as the mask."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from PIL import Image

from nodes.image_io import PreviewImage, annotated_path, file_sha256, pillow_tolerant
from nodes.library.color import parse_color


def background(width: int, height: int, color: str) -> torch.Tensor:
    """A [1,H,W,3] image of one colour (#RRGGBB; anything else gives black, as in ComfyUI)."""
    try:
        rgb = parse_color(color)[0]
    except ValueError:
        rgb = 0
    levels = torch.tensor([(rgb >> 16) & 255, (rgb >> 8) & 255, rgb & 255], dtype=torch.float32) / 255.0
    return levels.expand(1, height, width, 3).clone()


def paint(base: torch.Tensor, painted: Image.Image) -> tuple[torch.Tensor, torch.Tensor]:
    """(base with the RGBA painting laid over it, the painting's alpha as a [1,H,W] mask)."""
    h, w = base.shape[1], base.shape[2]
    painted = painted.convert("RGBA")
    if painted.size != (w, h):
        painted = painted.resize((w, h), Image.LANCZOS)
    layer = torch.from_numpy(np.asarray(painted).astype(np.float32) / 255.0)
    alpha = layer[..., 3:4]
    return (layer[..., :3] * alpha + base[0] * (1.0 - alpha)).unsqueeze(0), alpha[..., 0].unsqueeze(0)


class Painter:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_painter"
    FUNCTION = "execute"
    CATEGORY = "image"

    @classmethod
    def INPUT_TYPES(cls):
        size = {"default": 512, "min": 64, "max": 4096, "step": 64, "socketless": True, "hidden": True}
        return {
            "required": {
                # the file the painting widget uploaded (an input-folder name, maybe annotated)
                "mask": (
                    "STRING",
                    {
                        "default": "",
                        "multiline": False,
                        "socketless": True,
                        "widgetType": "PAINTER",
                        "image_upload": True,
                    },
                ),
                "width": ("INT", dict(size)),
                "height": ("INT", dict(size)),
                "bg_color": ("COLOR", {"default": "#000000"}),
            },
            "optional": {"image": ("IMAGE", {"tooltip": "The image to paint over (its first frame)."})},
        }

    RETURN_TYPES = ("IMAGE", "MASK")
    OUTPUT_TOOLTIPS = (None, None)
    DESCRIPTION = "Paints over an image, or over a width x height background: the painted image and its mask."

    @classmethod
    def IS_CHANGED(cls, mask: str = "", **kwargs: Any) -> str:
        # a repainted canvas keeps its file name: the content decides whether the node runs again
        if mask and mask.strip():
            path = annotated_path(mask)
            if path.exists():
                return file_sha256(path)
        return ""

    def execute(self, mask: str, width: int, height: int, bg_color: str = "#000000", image: torch.Tensor | None = None):
        base = image[:1] if image is not None else background(width, height, bg_color)
        if mask and mask.strip():
            path = annotated_path(mask)
            if not path.is_file():
                raise FileNotFoundError(f"Painter: the painting {mask!r} is not in the input folder")
            out, coverage = paint(base, pillow_tolerant(Image.open, path))
        else:
            out, coverage = base, torch.zeros((1, base.shape[1], base.shape[2]), dtype=torch.float32)
        return {"ui": PreviewImage().save_images(out)["ui"], "result": (out, coverage)}


NODE_CLASS_MAPPINGS = {"Painter": Painter}
NODE_DISPLAY_NAME_MAPPINGS = {"Painter": "Painter"}
