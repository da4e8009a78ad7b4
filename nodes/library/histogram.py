"""Today's ComfyUI Image Histogram (`comfy_extras.nodes_curve`, added after 0.3.64): 256-bin histograms of the
first image's red, green and blue levels, their mean (the "RGB" histogram of photo editors) and the
luminance (ITU-R BT.709 weights), as lists the web UI's curve editor draws."""

from __future__ import annotations

import torch

BT709 = (0.2126, 0.7152, 0.0722)


def _levels(values: torch.Tensor) -> torch.Tensor:
    """0..1 values as 0..255 levels, truncated as an 8-bit conversion does."""
    return (values * 255).clamp(0, 255).to(torch.uint8).long()


def histograms(image: torch.Tensor) -> tuple[list[int], ...]:
    first = image[0, ..., :3].float()
    red, green, blue = (torch.bincount(_levels(first[..., c]).flatten(), minlength=256)[:256] for c in range(3))
    luminance = sum(w * first[..., c] for c, w in enumerate(BT709))
    lum = torch.bincount(_levels(luminance).flatten(), minlength=256)[:256]
    rgb = (red + green + blue) // 3
    return rgb.tolist(), lum.tolist(), red.tolist(), green.tolist(), blue.tolist()


class ImageHistogram:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_curve"
    FUNCTION = "execute"
    CATEGORY = "utils"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE", {})}}

    RETURN_TYPES = ("HISTOGRAM",) * 5
    RETURN_NAMES = ("rgb", "luminance", "red", "green", "blue")
    OUTPUT_TOOLTIPS = (None,) * 5
    DESCRIPTION = "Histograms (256 levels) of the first image: RGB mean, luminance, red, green and blue."

    def execute(self, image: torch.Tensor):
        return histograms(image)


NODE_CLASS_MAPPINGS = {"ImageHistogram": ImageHistogram}
NODE_DISPLAY_NAME_MAPPINGS = {"ImageHistogram": "Image Histogram"}
