"""Today's ComfyUI crop nodes (`comfy_extras.nodes_images`, added after 0.3.64): Crop Image, whose region is
one BOUNDING_BOX value the web UI draws on the image, and the Bounding Box primitive."""

from __future__ import annotations

from typing import Any

import torch

from nodes import MAX_RESOLUTION
from nodes.image_io import PreviewImage

MODULE = "comfy_extras.nodes_images"


def crop(image: torch.Tensor, region: dict[str, int]) -> torch.Tensor:
    """The region {x, y, width, height} of [N,H,W,C] images; a corner past the image is pulled back inside it."""
    x = min(region.get("x", 0), image.shape[2] - 1)
    y = min(region.get("y", 0), image.shape[1] - 1)
    return image[:, y : y + region.get("height", 512), x : x + region.get("width", 512), :]


class ImageCropV2:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "image/transform"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE", {}), "crop_region": ("BOUNDING_BOX", {"component": "ImageCrop"})}}

    RETURN_TYPES = ("IMAGE",)
    OUTPUT_TOOLTIPS = (None,)
    SEARCH_ALIASES = ["crop", "cut", "trim"]
    DESCRIPTION = "Crops the images to the region drawn on them; shows the result."

    def execute(self, image: torch.Tensor, crop_region: dict[str, Any]):
        out = crop(image, crop_region)
        return {"ui": PreviewImage().save_images(out)["ui"], "result": (out,)}


class PrimitiveBoundingBox:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "utilities/primitive"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "x": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION}),
                "y": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION}),
                "width": ("INT", {"default": 512, "min": 1, "max": MAX_RESOLUTION}),
                "height": ("INT", {"default": 512, "min": 1, "max": MAX_RESOLUTION}),
            }
        }

    RETURN_TYPES = ("BOUNDING_BOX",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = "A bounding box: its top-left corner and size in pixels."

    def execute(self, x: int, y: int, width: int, height: int):
        return ({"x": x, "y": y, "width": width, "height": height},)


NODE_CLASS_MAPPINGS = {"ImageCropV2": ImageCropV2, "PrimitiveBoundingBox": PrimitiveBoundingBox}
NODE_DISPLAY_NAME_MAPPINGS = {"ImageCropV2": "Crop Image", "PrimitiveBoundingBox": "Bounding Box"}
