"""ComfyUI's morphology and YCbCr nodes (comfy_extras.nodes_morphology), on plain torch.

ComfyUI runs these through kornia (0.9.0 in the reference install); this module gives kornia's numbers:
- Morphology uses a flat square kernel of ones with kornia's defaults: origin (k//2, k//2), pixels outside
  the image ignored ("geodesic" border), and dilation reflecting the kernel (Minkowski) while erosion does
  not. For an even kernel size the two windows therefore sit differently: erosion covers [i-k//2, i+k-1-k//2],
  dilation [i-(k-1-k//2), i+k//2]. A square's max (min) is the max (min) of row maxima, and max/min round
  nothing, so the separable form below is exact.
- ImageRGBToYUV / ImageYUVToRGB use kornia's full-range YCbCr formulas (0.299/0.587/0.114; 0.564, 0.713 and
  their exact inverses) in kornia's order of operations; RGB results are clamped to 0..1.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

MODULE = "comfy_extras.nodes_morphology"
OPERATIONS = ["erode", "dilate", "open", "close", "gradient", "bottom_hat", "top_hat"]


def _window_extreme(x: torch.Tensor, dim: int, before: int, after: int, dilate: bool) -> torch.Tensor:
    """Max (dilate) or min along `dim` (-1 or -2) of [B,C,H,W] over the window [i-before, i+after],
    clipped to the image."""
    n = x.shape[dim]
    # Window cells past the far edge of the image are all ignored, so a longer reach changes nothing.
    before, after = min(before, n - 1), min(after, n - 1)
    fill = -float("inf") if dilate else float("inf")
    pad = (before, after) if dim == -1 else (0, 0, before, after)
    windows = F.pad(x, pad, mode="constant", value=fill).unfold(dim, before + after + 1, 1)
    return windows.amax(-1) if dilate else windows.amin(-1)


def erode(x: torch.Tensor, k: int) -> torch.Tensor:
    o = k // 2
    return _window_extreme(_window_extreme(x, -2, o, k - 1 - o, False), -1, o, k - 1 - o, False)


def dilate(x: torch.Tensor, k: int) -> torch.Tensor:
    o = k // 2
    return _window_extreme(_window_extreme(x, -2, k - 1 - o, o, True), -1, k - 1 - o, o, True)


MORPHOLOGY: dict[str, Callable[[torch.Tensor, int], torch.Tensor]] = {
    "erode": erode,
    "dilate": dilate,
    "open": lambda x, k: dilate(erode(x, k), k),
    "close": lambda x, k: erode(dilate(x, k), k),
    "gradient": lambda x, k: dilate(x, k) - erode(x, k),
    "bottom_hat": lambda x, k: erode(dilate(x, k), k) - x,
    "top_hat": lambda x, k: x - dilate(erode(x, k), k),
}


class Morphology:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE",),
                "operation": (
                    "COMBO",
                    {
                        "options": OPERATIONS,
                        "multiselect": False,
                        "tooltip": "erode: local minimum; dilate: local maximum; open/close: "
                        "erode then dilate / dilate then erode; gradient: dilate - "
                        "erode; top_hat: image - open; bottom_hat: close - image.",
                    },
                ),
                "kernel_size": (
                    "INT",
                    {
                        "default": 3,
                        "min": 3,
                        "max": 999,
                        "step": 1,
                        "tooltip": "Side of the square neighbourhood, in pixels.",
                    },
                ),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "execute"
    CATEGORY = "image/postprocessing"
    DESCRIPTION = "Grey-scale morphology of each channel over a square neighbourhood."

    def execute(self, image: torch.Tensor, operation: str, kernel_size: int):
        op = MORPHOLOGY.get(operation)
        if op is None:
            raise ValueError(
                f"Invalid operation {operation} for morphology. Must be one of 'erode', 'dilate', "
                "'open', 'close', 'gradient', 'tophat', 'bottomhat'"
            )
        return (op(image.movedim(-1, 1), kernel_size).movedim(1, -1),)


def _check_three_channels(image: torch.Tensor) -> None:
    """kornia's check (and message) for a channel-first [*,3,H,W] image."""
    if len(image.shape) < 3 or image.shape[-3] != 3:
        raise ValueError(f"Input size must have a shape of (*, 3, H, W). Got {image.shape}")


def rgb_to_ycbcr(image: torch.Tensor) -> torch.Tensor:
    """[*,3,H,W] RGB -> YCbCr, full range, chroma centred on 0.5."""
    _check_three_channels(image)
    r, g, b = image[..., 0, :, :], image[..., 1, :, :], image[..., 2, :, :]
    y = 0.299 * r + 0.587 * g + 0.114 * b
    return torch.stack([y, (b - y) * 0.564 + 0.5, (r - y) * 0.713 + 0.5], -3)


def ycbcr_to_rgb(image: torch.Tensor) -> torch.Tensor:
    """[*,3,H,W] YCbCr -> RGB, clamped to 0..1 (the exact inverse of rgb_to_ycbcr before clamping)."""
    _check_three_channels(image)
    y, cb, cr = image[..., 0, :, :], image[..., 1, :, :] - 0.5, image[..., 2, :, :] - 0.5
    r = y + 1.4025245442 * cr
    g = y - 0.7144034731 * cr - 0.3443401356 * cb
    b = y + 1.7730496454 * cb
    return torch.stack([r, g, b], -3).clamp(0, 1)


class ImageRGBToYUV:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ("IMAGE", "IMAGE", "IMAGE")
    RETURN_NAMES = ("Y", "U", "V")
    FUNCTION = "execute"
    CATEGORY = "image/batch"
    DESCRIPTION = "Splits an RGB image into its Y, U (Cb) and V (Cr) planes, each as a grey image."

    def execute(self, image: torch.Tensor):
        ycc = rgb_to_ycbcr(image.movedim(-1, 1)).movedim(1, -1)
        return tuple(ycc[..., c : c + 1].expand_as(image) for c in range(3))


class ImageYUVToRGB:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"Y": ("IMAGE",), "U": ("IMAGE",), "V": ("IMAGE",)}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "execute"
    CATEGORY = "image/batch"
    DESCRIPTION = "Joins Y, U (Cb) and V (Cr) planes (each image's channel mean) into an RGB image."

    def execute(self, Y: torch.Tensor, U: torch.Tensor, V: torch.Tensor):
        planes = torch.cat([t.mean(dim=-1, keepdim=True) for t in (Y, U, V)], dim=-1)
        return (ycbcr_to_rgb(planes.movedim(-1, 1)).movedim(1, -1),)


NODE_CLASS_MAPPINGS = {
    "Morphology": Morphology,
    "ImageRGBToYUV": ImageRGBToYUV,
    "ImageYUVToRGB": ImageYUVToRGB,
}

NODE_DISPLAY_NAME_MAPPINGS = {
    "Morphology": "ImageMorphology",
}
