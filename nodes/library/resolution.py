"""Today's ComfyUI Resolution Selector (`comfy_extras.nodes_resolution`, added after 0.3.64): a width and
height for an aspect ratio and a number of megapixels, rounded to a multiple and kept above a minimum side."""

from __future__ import annotations

import math

# The combo's labels and the ratio (width, height) each stands for, in ComfyUI's order.
ASPECT_RATIOS: dict[str, tuple[int, int]] = {
    "1:1 (Square)": (1, 1),
    "3:2 (Photo)": (3, 2),
    "4:3 (Standard)": (4, 3),
    "16:9 (Widescreen)": (16, 9),
    "21:9 (Ultrawide)": (21, 9),
    "2:3 (Portrait Photo)": (2, 3),
    "3:4 (Portrait Standard)": (3, 4),
    "9:16 (Portrait Widescreen)": (9, 16),
}
MEGAPIXEL = 1024 * 1024  # 1.0 megapixels is 1024x1024 here


def resolution(aspect_ratio: str, megapixels: float, multiple: int, minimum: int) -> tuple[int, int]:
    w_ratio, h_ratio = ASPECT_RATIOS[aspect_ratio]
    scale = math.sqrt(megapixels * MEGAPIXEL / (w_ratio * h_ratio))
    width = round(w_ratio * scale / multiple) * multiple
    height = round(h_ratio * scale / multiple) * multiple
    if width >= minimum and height >= minimum:
        return width, height
    # Too small: the smallest k with (w_ratio*k, h_ratio*k) both multiples of `multiple` and both >= minimum.
    k_step = math.lcm(multiple // math.gcd(w_ratio, multiple), multiple // math.gcd(h_ratio, multiple))
    k_min = math.ceil(max(minimum / w_ratio, minimum / h_ratio))
    k = math.ceil(k_min / k_step) * k_step
    return w_ratio * k, h_ratio * k


class ResolutionSelector:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_resolution"
    FUNCTION = "execute"
    CATEGORY = "utilities"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "aspect_ratio": (
                    "COMBO",
                    {
                        "default": "1:1 (Square)",
                        "multiselect": False,
                        "options": list(ASPECT_RATIOS),
                        "tooltip": "Width to height of the result.",
                    },
                ),
                "megapixels": (
                    "FLOAT",
                    {
                        "default": 1.0,
                        "min": 0.1,
                        "max": 16.0,
                        "step": 0.1,
                        "tooltip": "Pixels of the result in millions of 1024x1024.",
                    },
                ),
                "multiple": (
                    "INT",
                    {
                        "default": 8,
                        "min": 8,
                        "max": 128,
                        "step": 4,
                        "advanced": True,
                        "tooltip": "Both sides are rounded to a multiple of this.",
                    },
                ),
                "minimum": (
                    "INT",
                    {
                        "default": 256,
                        "min": 32,
                        "max": 4096,
                        "step": 32,
                        "advanced": True,
                        "tooltip": "Neither side is smaller than this.",
                    },
                ),
            }
        }

    RETURN_TYPES = ("INT", "INT")
    RETURN_NAMES = ("width", "height")
    OUTPUT_TOOLTIPS = ("The width in pixels.", "The height in pixels.")
    DESCRIPTION = "A width and height of the chosen aspect ratio and size, e.g. for an empty latent image."

    def execute(self, aspect_ratio: str, megapixels: float, multiple: int = 8, minimum: int = 256):
        return resolution(aspect_ratio, megapixels, multiple, minimum)


NODE_CLASS_MAPPINGS = {"ResolutionSelector": ResolutionSelector}
NODE_DISPLAY_NAME_MAPPINGS = {"ResolutionSelector": "Resolution Selector"}
