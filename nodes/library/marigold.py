"""Today's ComfyUI's comfy_extras.nodes_marigold: Marigold V2 Post-Process, the last node of the Marigold V2 templates
(depth, surface normals, albedo estimation on Qwen-Image-Edit 2509 with a per-task LoRA, VAE and conditioning). It
turns the VAE's decoded prediction into a viewable image; what each prediction means is Marigold's: an affine-invariant
depth (shown with near bright), normals in [-1, 1] per channel, albedo in linear RGB."""

from __future__ import annotations

import torch
import torch.nn.functional as F

PREDICTIONS = ("depth", "normals", "albedo")
SRGB_KNEE = 0.0031308  # below it the sRGB curve is linear (IEC 61966-2-1)


def linear_to_srgb(x: torch.Tensor) -> torch.Tensor:
    """The sRGB transfer curve, with the power branch's input clamped to the knee so its gradient stays finite."""
    return torch.where(x <= SRGB_KNEE, x * 12.92, 1.055 * x.clamp(min=SRGB_KNEE) ** (1.0 / 2.4) - 0.055)


def depth_image(image: torch.Tensor) -> torch.Tensor:
    """The channel mean normalised per image to [0, 1], inverted so that near is bright, as three equal channels."""
    depth = image.mean(dim=-1, keepdim=True)
    lo = depth.amin(dim=(1, 2, 3), keepdim=True)
    hi = depth.amax(dim=(1, 2, 3), keepdim=True)
    return ((hi - depth) / (hi - lo).clamp(min=1e-6)).repeat(1, 1, 1, 3)


def normals_image(image: torch.Tensor) -> torch.Tensor:
    """Each pixel's vector (decoded in [0, 1], meaning [-1, 1]) scaled to unit length, back in [0, 1]."""
    return (F.normalize(image * 2.0 - 1.0, dim=-1) + 1.0) * 0.5


class MarigoldV2PostProcess:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_marigold"
    FUNCTION = "execute"
    CATEGORY = "image/geometry estimation"
    RETURN_TYPES = ("IMAGE",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = (
        "Turns a decoded Marigold V2 prediction into an image: normalized depth with near as bright, unit surface "
        "normals, or sRGB albedo."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE", {}),
                "prediction": ("COMBO", {"multiselect": False, "options": list(PREDICTIONS)}),
            }
        }

    def execute(self, image: torch.Tensor, prediction: str):
        if prediction == "normals":
            return (normals_image(image),)
        if prediction == "albedo":
            return (linear_to_srgb(image),)
        if prediction == "depth":
            return (depth_image(image),)
        raise ValueError(f"prediction: unknown value {prediction!r} (one of {', '.join(PREDICTIONS)})")


NODE_CLASS_MAPPINGS = {"MarigoldV2PostProcess": MarigoldV2PostProcess}
NODE_DISPLAY_NAME_MAPPINGS = {"MarigoldV2PostProcess": "Marigold V2 Post-Process"}
