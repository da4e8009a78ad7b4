"""Core LATENT nodes that need no model: empty latents, resizing, batch slicing/repeating, noise masks.

A LATENT is a dict: "samples" [B,C,H/8,W/8], optional "noise_mask" [B|1,1,H,W] and optional
"batch_index" (the seed offsets of the batch items, so a slice of a batch gets the same noise it
would have had in the full batch).
"""

from __future__ import annotations

import math

import torch

from .upscale import common_upscale

MAX_RESOLUTION = 16384
LATENT_UPSCALE_METHODS = ["nearest-exact", "bilinear", "area", "bicubic", "bislerp"]
CROP_METHODS = ["disabled", "center"]


class EmptyLatentImage:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "width": (
                    "INT",
                    {
                        "default": 512,
                        "min": 16,
                        "max": MAX_RESOLUTION,
                        "step": 8,
                        "tooltip": "Width of the latent images, in pixels.",
                    },
                ),
                "height": (
                    "INT",
                    {
                        "default": 512,
                        "min": 16,
                        "max": MAX_RESOLUTION,
                        "step": 8,
                        "tooltip": "Height of the latent images, in pixels.",
                    },
                ),
                "batch_size": (
                    "INT",
                    {"default": 1, "min": 1, "max": 4096, "tooltip": "How many latent images the batch holds."},
                ),
            }
        }

    RETURN_TYPES = ("LATENT",)
    OUTPUT_TOOLTIPS = ("A batch of all-zero latent images.",)
    FUNCTION = "generate"
    CATEGORY = "latent"
    DESCRIPTION = "Makes a batch of blank (all-zero) 4-channel latent images for a sampler to denoise."

    def generate(self, width: int, height: int, batch_size: int = 1):
        # As today's ComfyUI: the ratio it was made for, so a sampler can resize it for a 16x model.
        return ({"samples": torch.zeros([batch_size, 4, height // 8, width // 8]), "downscale_ratio_spacial": 8},)


class EmptySD3LatentImage:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_sd3"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "width": ("INT", {"default": 1024, "min": 16, "max": MAX_RESOLUTION, "step": 16}),
                "height": ("INT", {"default": 1024, "min": 16, "max": MAX_RESOLUTION, "step": 16}),
                "batch_size": ("INT", {"default": 1, "min": 1, "max": 4096}),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "generate"
    CATEGORY = "latent/sd3"
    DESCRIPTION = "Makes a batch of blank 16-channel latent images (SD3 / Flux latent layout)."

    def generate(self, width: int, height: int, batch_size: int = 1):
        return ({"samples": torch.zeros([batch_size, 16, height // 8, width // 8])},)


class LatentUpscale:
    upscale_methods = LATENT_UPSCALE_METHODS  # packs read these lists from the class, as in ComfyUI
    crop_methods = CROP_METHODS

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples": ("LATENT",),
                "upscale_method": (cls.upscale_methods,),
                "width": ("INT", {"default": 512, "min": 0, "max": MAX_RESOLUTION, "step": 8}),
                "height": ("INT", {"default": 512, "min": 0, "max": MAX_RESOLUTION, "step": 8}),
                "crop": (cls.crop_methods,),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "upscale"
    CATEGORY = "latent"
    DESCRIPTION = (
        "Resizes latent images to a pixel size; a 0 width or height keeps the aspect ratio, "
        "and sizes are at least 64 pixels."
    )

    def upscale(self, samples: dict, upscale_method: str, width: int, height: int, crop: str):
        if width == 0 and height == 0:
            return (samples,)
        lat = samples["samples"]
        if width == 0:
            height = max(64, height)
            width = max(64, round(lat.shape[-1] * height / lat.shape[-2]))
        elif height == 0:
            width = max(64, width)
            height = max(64, round(lat.shape[-2] * width / lat.shape[-1]))
        else:
            width, height = max(64, width), max(64, height)
        out = samples.copy()
        out["samples"] = common_upscale(lat, width // 8, height // 8, upscale_method, crop)
        return (out,)


class LatentUpscaleBy:
    upscale_methods = LATENT_UPSCALE_METHODS  # packs read these lists from the class, as in ComfyUI

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples": ("LATENT",),
                "upscale_method": (cls.upscale_methods,),
                "scale_by": ("FLOAT", {"default": 1.5, "min": 0.01, "max": 8.0, "step": 0.01}),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "upscale"
    CATEGORY = "latent"
    DESCRIPTION = "Resizes latent images by a factor."

    def upscale(self, samples: dict, upscale_method: str, scale_by: float):
        lat = samples["samples"]
        width, height = round(lat.shape[-1] * scale_by), round(lat.shape[-2] * scale_by)
        out = samples.copy()
        out["samples"] = common_upscale(lat, width, height, upscale_method, "disabled")
        return (out,)


def _masks_for_batch(masks: torch.Tensor, batch: int) -> torch.Tensor:
    """Cycle a shorter stack of masks until it covers `batch` items."""
    if masks.shape[0] >= batch:
        return masks
    reps = math.ceil(batch / masks.shape[0])
    return masks.repeat((reps,) + (1,) * (masks.ndim - 1))[:batch]


class LatentFromBatch:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples": ("LATENT",),
                "batch_index": ("INT", {"default": 0, "min": 0, "max": 63}),
                "length": ("INT", {"default": 1, "min": 1, "max": 64}),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "frombatch"
    CATEGORY = "latent/batch"
    DESCRIPTION = "Takes `length` latents starting at `batch_index` out of a batch, keeping their seed offsets."

    def frombatch(self, samples: dict, batch_index: int, length: int):
        lat = samples["samples"]
        start = min(lat.shape[0] - 1, batch_index)
        length = min(lat.shape[0] - start, length)
        out = samples.copy()
        out["samples"] = lat[start : start + length].clone()
        if "noise_mask" in samples:
            masks = samples["noise_mask"]
            # A single mask applies to every item and stays single.
            out["noise_mask"] = (
                masks.clone()
                if masks.shape[0] == 1
                else _masks_for_batch(masks, lat.shape[0])[start : start + length].clone()
            )
        if "batch_index" in samples:
            out["batch_index"] = samples["batch_index"][start : start + length]
        else:
            out["batch_index"] = list(range(start, start + length))
        return (out,)


class RepeatLatentBatch:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples": ("LATENT",),
                "amount": ("INT", {"default": 1, "min": 1, "max": 64}),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "repeat"
    CATEGORY = "latent/batch"
    DESCRIPTION = "Repeats the whole latent batch `amount` times."

    def repeat(self, samples: dict, amount: int):
        lat = samples["samples"]
        out = samples.copy()
        out["samples"] = lat.repeat((amount,) + (1,) * (lat.ndim - 1))
        masks = samples.get("noise_mask")
        if masks is not None and masks.shape[0] > 1:
            # ComfyUI repeats the mask stack as given (even when shorter than the batch); kept for parity.
            out["noise_mask"] = masks.repeat((amount,) + (1,) * (masks.ndim - 1))
        if "batch_index" in samples:
            idx = samples["batch_index"]
            # Each copy continues the seed offsets after the span the original covers.
            span = max(idx) - min(idx) + 1
            out["batch_index"] = idx + [i + k * span for k in range(1, amount) for i in idx]
        return (out,)


class SetLatentNoiseMask:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"samples": ("LATENT",), "mask": ("MASK",)}}

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "set_mask"
    CATEGORY = "latent/inpaint"
    DESCRIPTION = "Attaches a mask so that sampling only changes the latent where the mask is non-zero."

    def set_mask(self, samples: dict, mask: torch.Tensor):
        out = samples.copy()
        out["noise_mask"] = mask.reshape((-1, 1, mask.shape[-2], mask.shape[-1]))
        return (out,)


NODE_CLASS_MAPPINGS = {
    "EmptyLatentImage": EmptyLatentImage,
    "EmptySD3LatentImage": EmptySD3LatentImage,
    "LatentUpscale": LatentUpscale,
    "LatentUpscaleBy": LatentUpscaleBy,
    "LatentFromBatch": LatentFromBatch,
    "RepeatLatentBatch": RepeatLatentBatch,
    "SetLatentNoiseMask": SetLatentNoiseMask,
}

# EmptySD3LatentImage has no display name in ComfyUI (the frontend shows the class name).
NODE_DISPLAY_NAME_MAPPINGS = {
    "EmptyLatentImage": "Empty Latent Image",
    "LatentUpscale": "Upscale Latent",
    "LatentUpscaleBy": "Upscale Latent By",
    "LatentFromBatch": "Latent From Batch",
    "RepeatLatentBatch": "Repeat Latent Batch",
    "SetLatentNoiseMask": "Set Latent Noise Mask",
}
