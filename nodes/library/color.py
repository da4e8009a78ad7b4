"""Today's ComfyUI Color Picker (`comfy_extras.nodes_color`, class ColorToRGBInt, added after 0.3.64): a colour
as one RGB integer (red * 65536 + green * 256 + blue), its #RRGGBB text and its alpha."""

from __future__ import annotations

import re

HEX = re.compile(r"#[0-9a-fA-F]{6}([0-9a-fA-F]{2})?")


def parse_color(color: str) -> tuple[int, str, float]:
    """(rgb int, '#RRGGBB', alpha in 0..1) of '#RRGGBB' or '#RRGGBBAA' (alpha 1 when absent)."""
    if not HEX.fullmatch(color):
        raise ValueError(f"Color Picker: {color!r} is not a colour in the format #RRGGBB or #RRGGBBAA")
    alpha = int(color[7:9], 16) / 255.0 if len(color) == 9 else 1.0
    return int(color[1:7], 16), color[:7], alpha


class ColorToRGBInt:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_color"
    FUNCTION = "execute"
    CATEGORY = "utilities"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"color": ("COLOR", {})}}

    RETURN_TYPES = ("INT", "COLOR", "FLOAT")
    RETURN_NAMES = ("rgb_int", "hex", "alpha")
    OUTPUT_TOOLTIPS = (None, None, None)
    DESCRIPTION = "The colour as one RGB integer, as #RRGGBB text and its alpha (opacity, 0 to 1)."

    def execute(self, color: str):
        return parse_color(color)


NODE_CLASS_MAPPINGS = {"ColorToRGBInt": ColorToRGBInt}
NODE_DISPLAY_NAME_MAPPINGS = {"ColorToRGBInt": "Color Picker"}
