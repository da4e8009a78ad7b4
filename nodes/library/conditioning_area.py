"""Area and mask conditioning (ComfyUI's nodes.py: ConditioningSetArea, ConditioningSetAreaPercentage,
ConditioningSetAreaStrength, ConditioningSetMask).

The nodes only write options into the conditioning entries; the sampler resolves them against the latent
and blends each entry's prediction over its area with its weight (nodes.conditioning_areas).
"""

from __future__ import annotations

import torch

from nodes.conditioning import require
from nodes.conditioning_ops import MAX_RESOLUTION, set_values

STRENGTH = (
    "FLOAT",
    {
        "default": 1.0,
        "min": 0.0,
        "max": 10.0,
        "step": 0.01,
        "tooltip": "Weight of this conditioning where it applies, against the others.",
    },
)


class ConditioningSetArea:
    @classmethod
    def INPUT_TYPES(cls):
        pixels = lambda default, low, tip: (
            "INT",
            {
                "default": default,
                "min": low,
                "max": MAX_RESOLUTION,  # noqa: E731
                "step": 8,
                "tooltip": tip,
            },
        )
        return {
            "required": {
                "conditioning": ("CONDITIONING",),
                "width": pixels(64, 64, "Width of the area in pixels (used in steps of 8)."),
                "height": pixels(64, 64, "Height of the area in pixels (used in steps of 8)."),
                "x": pixels(0, 0, "Left edge of the area in pixels."),
                "y": pixels(0, 0, "Top edge of the area in pixels."),
                "strength": STRENGTH,
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "append"
    CATEGORY = "conditioning"
    DESCRIPTION = (
        "Limits the conditioning to a rectangle of the image; the sampler predicts that part with it "
        "and fades its edges into the rest."
    )

    def append(self, conditioning: list, width: int, height: int, x: int, y: int, strength: float):
        conditioning = require(conditioning, "conditioning")
        # In latent cells (8 pixels), as ComfyUI stores it.
        return (
            set_values(
                conditioning,
                {"area": (height // 8, width // 8, y // 8, x // 8), "strength": strength, "set_area_to_bounds": False},
            ),
        )


class ConditioningSetAreaPercentage:
    @classmethod
    def INPUT_TYPES(cls):
        fraction = lambda default, tip: (
            "FLOAT",
            {
                "default": default,
                "min": 0,
                "max": 1.0,
                "step": 0.01,  # noqa: E731
                "tooltip": tip,
            },
        )
        return {
            "required": {
                "conditioning": ("CONDITIONING",),
                "width": fraction(1.0, "Width of the area as a fraction of the image width."),
                "height": fraction(1.0, "Height of the area as a fraction of the image height."),
                "x": fraction(0, "Left edge of the area as a fraction of the image width."),
                "y": fraction(0, "Top edge of the area as a fraction of the image height."),
                "strength": STRENGTH,
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "append"
    CATEGORY = "conditioning"
    DESCRIPTION = "Limits the conditioning to a rectangle given as fractions of the image size."

    def append(self, conditioning: list, width: float, height: float, x: float, y: float, strength: float):
        conditioning = require(conditioning, "conditioning")
        return (
            set_values(
                conditioning,
                {"area": ("percentage", height, width, y, x), "strength": strength, "set_area_to_bounds": False},
            ),
        )


class ConditioningSetAreaStrength:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"conditioning": ("CONDITIONING",), "strength": STRENGTH}}

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "append"
    CATEGORY = "conditioning"
    DESCRIPTION = "Sets the weight of the conditioning against the others it is combined with."

    def append(self, conditioning: list, strength: float):
        return (set_values(require(conditioning, "conditioning"), {"strength": strength}),)


class ConditioningSetMask:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "conditioning": ("CONDITIONING",),
                "mask": ("MASK", {"tooltip": "Where the conditioning applies, and how strongly (0..1)."}),
                "strength": (
                    "FLOAT",
                    {"default": 1.0, "min": 0.0, "max": 10.0, "step": 0.01, "tooltip": "Multiplies the mask."},
                ),
                "set_cond_area": (
                    ["default", "mask bounds"],
                    {
                        "tooltip": "mask bounds: predict only the mask's bounding box with this "
                        "conditioning (faster, and the model sees the region alone)."
                    },
                ),
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "append"
    CATEGORY = "conditioning"
    DESCRIPTION = "Limits the conditioning to a mask; the sampler weights its prediction by the mask."

    def append(self, conditioning: list, mask: torch.Tensor, set_cond_area: str, strength: float):
        conditioning = require(conditioning, "conditioning")
        if not isinstance(mask, torch.Tensor) or mask.ndim not in (2, 3):
            raise ValueError("mask: expected a MASK [B,H,W] or [H,W]")
        if mask.ndim < 3:
            mask = mask.unsqueeze(0)
        return (
            set_values(
                conditioning,
                {"mask": mask, "set_area_to_bounds": set_cond_area != "default", "mask_strength": strength},
            ),
        )


NODE_CLASS_MAPPINGS = {
    "ConditioningSetArea": ConditioningSetArea,
    "ConditioningSetAreaPercentage": ConditioningSetAreaPercentage,
    "ConditioningSetAreaStrength": ConditioningSetAreaStrength,
    "ConditioningSetMask": ConditioningSetMask,
}
NODE_DISPLAY_NAME_MAPPINGS = {
    "ConditioningSetArea": "Conditioning (Set Area)",
    "ConditioningSetAreaPercentage": "Conditioning (Set Area with Percentage)",
    "ConditioningSetMask": "Conditioning (Set Mask)",
}
