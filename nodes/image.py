"""Core IMAGE nodes that need no model: scaling, inverting, batching, blank images, outpaint padding.

IMAGE is float [B,H,W,C] in 0..1; the resize helpers work channel-first, hence the movedims.
"""

from __future__ import annotations

import torch

from .upscale import common_upscale

MAX_RESOLUTION = 16384
IMAGE_UPSCALE_METHODS = ["nearest-exact", "bilinear", "area", "bicubic", "lanczos"]
CROP_METHODS = ["disabled", "center"]


def scale_image(image: torch.Tensor, width: int, height: int, method: str, crop: str) -> torch.Tensor:
    """Resize IMAGE [B,H,W,C] to height x width."""
    return common_upscale(image.movedim(-1, 1), width, height, method, crop).movedim(1, -1)


class ImageScale:
    upscale_methods = IMAGE_UPSCALE_METHODS  # packs read these lists from the class, as in ComfyUI
    crop_methods = CROP_METHODS

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE",),
                "upscale_method": (cls.upscale_methods,),
                "width": ("INT", {"default": 512, "min": 0, "max": MAX_RESOLUTION, "step": 1}),
                "height": ("INT", {"default": 512, "min": 0, "max": MAX_RESOLUTION, "step": 1}),
                "crop": (cls.crop_methods,),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "upscale"
    CATEGORY = "image/upscaling"
    DESCRIPTION = "Resizes images to a size; a 0 width or height keeps the aspect ratio."

    def upscale(self, image: torch.Tensor, upscale_method: str, width: int, height: int, crop: str):
        if width == 0 and height == 0:
            return (image,)
        h, w = image.shape[1], image.shape[2]
        if width == 0:
            width = max(1, round(w * height / h))
        elif height == 0:
            height = max(1, round(h * width / w))
        return (scale_image(image, width, height, upscale_method, crop),)


class ImageScaleBy:
    upscale_methods = IMAGE_UPSCALE_METHODS  # packs read these lists from the class, as in ComfyUI

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE",),
                "upscale_method": (cls.upscale_methods,),
                "scale_by": ("FLOAT", {"default": 1.0, "min": 0.01, "max": 8.0, "step": 0.01}),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "upscale"
    CATEGORY = "image/upscaling"
    DESCRIPTION = "Resizes images by a factor."

    def upscale(self, image: torch.Tensor, upscale_method: str, scale_by: float):
        width, height = round(image.shape[2] * scale_by), round(image.shape[1] * scale_by)
        return (scale_image(image, width, height, upscale_method, "disabled"),)


class ImageInvert:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "invert"
    CATEGORY = "image"
    DESCRIPTION = "Inverts the colours (1 - value)."

    def invert(self, image: torch.Tensor):
        return (1.0 - image,)


class ImageBatch:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image1": ("IMAGE",), "image2": ("IMAGE",)}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "batch"
    CATEGORY = "image"
    DESCRIPTION = "Joins two image batches; image2 is resized (bilinear, center crop) to image1's size if needed."

    def batch(self, image1: torch.Tensor, image2: torch.Tensor):
        if image1.shape[1:] != image2.shape[1:]:
            image2 = scale_image(image2, image1.shape[2], image1.shape[1], "bilinear", "center")
        return (torch.cat((image1, image2), dim=0),)


class EmptyImage:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "width": ("INT", {"default": 512, "min": 1, "max": MAX_RESOLUTION, "step": 1}),
                "height": ("INT", {"default": 512, "min": 1, "max": MAX_RESOLUTION, "step": 1}),
                "batch_size": ("INT", {"default": 1, "min": 1, "max": 4096}),
                "color": ("INT", {"default": 0, "min": 0, "max": 0xFFFFFF, "step": 1, "display": "color"}),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "generate"
    CATEGORY = "image"
    DESCRIPTION = "Makes a batch of images filled with one colour (0xRRGGBB)."

    def generate(self, width: int, height: int, batch_size: int = 1, color: int = 0):
        rgb = torch.tensor([(color >> 16) & 0xFF, (color >> 8) & 0xFF, color & 0xFF], dtype=torch.float32) / 0xFF
        return (rgb.expand(batch_size, height, width, 3).clone(),)


class RebatchImages:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_rebatch"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": ("IMAGE",),
                "batch_size": ("INT", {"default": 1, "min": 1, "max": 4096}),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    INPUT_IS_LIST = True
    OUTPUT_IS_LIST = (True,)
    FUNCTION = "rebatch"
    CATEGORY = "image/batch"
    DESCRIPTION = "Regroups a list of image batches into batches of batch_size images (the last may be smaller)."

    def rebatch(self, images: list[torch.Tensor], batch_size: list[int]):
        size = batch_size[0]
        singles = [img[i : i + 1] for img in images for i in range(img.shape[0])]
        return ([torch.cat(singles[i : i + size], dim=0) for i in range(0, len(singles), size)],)


class ImagePadForOutpaint:
    @classmethod
    def INPUT_TYPES(cls):
        side = {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 8}
        return {
            "required": {
                "image": ("IMAGE",),
                "left": ("INT", dict(side)),
                "top": ("INT", dict(side)),
                "right": ("INT", dict(side)),
                "bottom": ("INT", dict(side)),
                "feathering": ("INT", {"default": 40, "min": 0, "max": MAX_RESOLUTION, "step": 1}),
            }
        }

    RETURN_TYPES = ("IMAGE", "MASK")
    FUNCTION = "expand_image"
    CATEGORY = "image"
    DESCRIPTION = (
        "Adds grey borders for outpainting and a mask that is 1 on the borders and fades in "
        "(quadratically, over `feathering` pixels) at the padded edges of the original."
    )

    def expand_image(self, image: torch.Tensor, left: int, top: int, right: int, bottom: int, feathering: int):
        b, h, w, c = image.shape
        out = torch.full((b, h + top + bottom, w + left + right, c), 0.5, dtype=torch.float32)
        out[:, top : top + h, left : left + w, :] = image
        mask = torch.ones((h + top + bottom, w + left + right), dtype=torch.float32)
        inner = torch.zeros((h, w), dtype=torch.float32)
        if 0 < feathering and feathering * 2 < h and feathering * 2 < w:
            # float64 so the squared ramp rounds to float32 once, as ComfyUI's Python-float loop does.
            rows = torch.arange(h, dtype=torch.float64).reshape(h, 1)
            cols = torch.arange(w, dtype=torch.float64).reshape(1, w)
            # Distance to the nearest padded side; unpadded sides do not feather (distance = full size).
            dist = torch.full((h, w), float(max(h, w)), dtype=torch.float64)
            if top:
                dist = torch.minimum(dist, rows.expand(h, w))
            if bottom:
                dist = torch.minimum(dist, (h - rows).expand(h, w))
            if left:
                dist = torch.minimum(dist, cols.expand(h, w))
            if right:
                dist = torch.minimum(dist, (w - cols).expand(h, w))
            ramp = (feathering - dist) / feathering
            inner = torch.where(dist < feathering, ramp * ramp, 0.0).float()
        mask[top : top + h, left : left + w] = inner
        return (out, mask.unsqueeze(0))


NODE_CLASS_MAPPINGS = {
    "ImageScale": ImageScale,
    "ImageScaleBy": ImageScaleBy,
    "ImageInvert": ImageInvert,
    "ImageBatch": ImageBatch,
    "EmptyImage": EmptyImage,
    "RebatchImages": RebatchImages,
    "ImagePadForOutpaint": ImagePadForOutpaint,
}

NODE_DISPLAY_NAME_MAPPINGS = {
    "ImageScale": "Upscale Image",
    "ImageScaleBy": "Upscale Image By",
    "ImageInvert": "Invert Image",
    "ImageBatch": "Batch Images",
    "RebatchImages": "Rebatch Images",
    "ImagePadForOutpaint": "Pad Image for Outpainting",
}
