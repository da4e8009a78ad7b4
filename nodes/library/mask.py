"""ComfyUI's mask nodes (comfy_extras.nodes_mask): conversions between IMAGE and MASK, solid, inverted,
cropped, combined, feathered, grown and thresholded masks, masked image/latent compositing, mask preview.

MASK is float [B,H,W] (a bare [H,W] is accepted wherever ComfyUI accepts it). Results must equal ComfyUI's
bit for bit, so the arithmetic keeps ComfyUI's order of operations, and where ComfyUI's indexing has a
quirk (FeatherMask's `right`/`bottom` ramps start on the first column/row) the quirk is kept.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from nodes.image_io import PreviewImage

MAX_RESOLUTION = 16384
MODULE = "comfy_extras.nodes_mask"
COMPOSITE_OPERATIONS = ["multiply", "add", "subtract", "and", "or", "xor"]
CHANNELS = ["red", "green", "blue", "alpha"]


def as_planes(mask: torch.Tensor) -> torch.Tensor:
    """[B,H,W] view of a MASK given as [H,W], [B,H,W] or [B,1,H,W]."""
    return mask.reshape((-1, mask.shape[-2], mask.shape[-1]))


def mask_to_rgb(mask: torch.Tensor) -> torch.Tensor:
    """The MASK as a grey IMAGE [B,H,W,3] (a broadcast view, no copy)."""
    # Through [B,1,H,W] as ComfyUI does: an empty mask then fails with ComfyUI's own reshape error.
    return mask.reshape((-1, 1, mask.shape[-2], mask.shape[-1])).movedim(1, -1).expand(-1, -1, -1, 3)


def match_batch(tensor: torch.Tensor, size: int) -> torch.Tensor:
    """Cut or cycle `tensor` along dim 0 to `size` items (a batch of 2 for 5 becomes a,b,a,b,a)."""
    have = tensor.shape[0]
    if have > size:
        return tensor[:size]
    if have < size:
        reps = [math.ceil(size / have)] + [1] * (tensor.ndim - 1)
        return tensor.repeat(reps)[:size]
    return tensor


def paste_masked(
    destination: torch.Tensor,
    source: torch.Tensor,
    x: int,
    y: int,
    mask: torch.Tensor | None,
    multiplier: int,
    resize_source: bool,
) -> torch.Tensor:
    """Blend channel-first `source` [B,C,h,w] into `destination` [B,C,H,W] (modified in place and returned)
    at (x, y) // multiplier, weighted by `mask` (resized bilinearly to the source).

    Positions are in pixels, so latents use multiplier 8; the source is cut to what lies inside the
    destination. Batches of source and mask are cycled to the destination's."""
    if resize_source:
        source = F.interpolate(source, size=(destination.shape[-2], destination.shape[-1]), mode="bilinear")
    source = match_batch(source, destination.shape[0])
    src_h, src_w = source.shape[-2], source.shape[-1]
    x = max(-src_w * multiplier, min(x, destination.shape[-1] * multiplier))
    y = max(-src_h * multiplier, min(y, destination.shape[-2] * multiplier))
    left, top = x // multiplier, y // multiplier
    if mask is None:
        weight = torch.ones_like(source)
    else:
        planes = mask.reshape((-1, 1, mask.shape[-2], mask.shape[-1]))
        weight = match_batch(F.interpolate(planes, size=(src_h, src_w), mode="bilinear"), source.shape[0])
    visible_w = destination.shape[-1] - left + min(0, x)
    visible_h = destination.shape[-2] - top + min(0, y)
    weight = weight[:, :, :visible_h, :visible_w]
    if weight.ndim < source.ndim:  # a [B,C,T,H,W] (video) latent: one mask for every frame
        weight = weight.unsqueeze(1)
    region = (..., slice(top, top + src_h), slice(left, left + src_w))
    # ComfyUI's blend: w*src + (1-w)*dst, the complement computed as ones - w.
    destination[region] = (
        weight * source[..., :visible_h, :visible_w] + (torch.ones_like(weight) - weight) * destination[region]
    )
    return destination


def with_matching_channels(destination: torch.Tensor, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """ComfyUI's channel reconciliation of two IMAGEs: a source with more channels loses the extra ones; a
    destination with more channels gains one opaque (1.0) channel."""
    if destination.shape[-1] < source.shape[-1]:
        return destination, source[..., : destination.shape[-1]]
    if destination.shape[-1] > source.shape[-1]:
        destination = F.pad(destination, (0, 1))
        destination[..., -1] = 1.0
    return destination, source


class LatentCompositeMasked:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "destination": ("LATENT",),
                "source": ("LATENT",),
                "x": (
                    "INT",
                    {
                        "default": 0,
                        "min": 0,
                        "max": MAX_RESOLUTION,
                        "step": 8,
                        "tooltip": "Left edge of the paste, in pixels (8 per latent cell).",
                    },
                ),
                "y": (
                    "INT",
                    {
                        "default": 0,
                        "min": 0,
                        "max": MAX_RESOLUTION,
                        "step": 8,
                        "tooltip": "Top edge of the paste, in pixels (8 per latent cell).",
                    },
                ),
                "resize_source": (
                    "BOOLEAN",
                    {"default": False, "tooltip": "Stretch the source to the destination's size first."},
                ),
            },
            "optional": {"mask": ("MASK", {"tooltip": "Where the source shows (1) and where it does not (0)."})},
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "composite"
    CATEGORY = "latent"
    DESCRIPTION = "Pastes one latent into another at a position, optionally through a mask."

    def composite(
        self, destination: dict, source: dict, x: int, y: int, resize_source: bool, mask: torch.Tensor | None = None
    ):
        out = dict(destination)
        out["samples"] = paste_masked(destination["samples"].clone(), source["samples"], x, y, mask, 8, resize_source)
        return (out,)


class ImageCompositeMasked:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "destination": ("IMAGE",),
                "source": ("IMAGE",),
                "x": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 1}),
                "y": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 1}),
                "resize_source": (
                    "BOOLEAN",
                    {"default": False, "tooltip": "Stretch the source to the destination's size first."},
                ),
            },
            "optional": {"mask": ("MASK", {"tooltip": "Where the source shows (1) and where it does not (0)."})},
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "composite"
    CATEGORY = "image"
    DESCRIPTION = "Pastes one image onto another at a position, optionally through a mask."

    def composite(
        self,
        destination: torch.Tensor,
        source: torch.Tensor,
        x: int,
        y: int,
        resize_source: bool,
        mask: torch.Tensor | None = None,
    ):
        destination, source = with_matching_channels(destination, source)
        out = paste_masked(destination.clone().movedim(-1, 1), source.movedim(-1, 1), x, y, mask, 1, resize_source)
        return (out.movedim(1, -1),)


class MaskToImage:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"mask": ("MASK",)}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "mask_to_image"
    CATEGORY = "mask"
    DESCRIPTION = "Turns a mask into a grey image (the mask value in all three colour channels)."

    def mask_to_image(self, mask: torch.Tensor):
        return (mask_to_rgb(mask),)


class ImageToMask:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE",),
                "channel": (CHANNELS, {"tooltip": "The image channel that becomes the mask."}),
            }
        }

    RETURN_TYPES = ("MASK",)
    FUNCTION = "image_to_mask"
    CATEGORY = "mask"
    DESCRIPTION = "Takes one channel of an image as a mask."

    def image_to_mask(self, image: torch.Tensor, channel: str):
        return (image[:, :, :, CHANNELS.index(channel)],)


class ImageColorToMask:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE",),
                "color": (
                    "INT",
                    {
                        "default": 0,
                        "min": 0,
                        "max": 0xFFFFFF,
                        "step": 1,
                        "display": "color",
                        "tooltip": "The colour as 0xRRGGBB.",
                    },
                ),
            }
        }

    RETURN_TYPES = ("MASK",)
    FUNCTION = "image_to_mask"
    CATEGORY = "mask"
    DESCRIPTION = "A mask that is 1 where the image's 8-bit colour equals the given colour, else 0."

    def image_to_mask(self, image: torch.Tensor, color: int):
        rgb8 = (torch.clamp(image, 0, 1.0) * 255.0).round().to(torch.int)
        packed = (rgb8[..., 0] << 16) + (rgb8[..., 1] << 8) + rgb8[..., 2]
        return ((packed == color).float(),)


class SolidMask:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "value": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.01}),
                "width": ("INT", {"default": 512, "min": 1, "max": MAX_RESOLUTION, "step": 1}),
                "height": ("INT", {"default": 512, "min": 1, "max": MAX_RESOLUTION, "step": 1}),
            }
        }

    RETURN_TYPES = ("MASK",)
    FUNCTION = "solid"
    CATEGORY = "mask"
    DESCRIPTION = "A single mask filled with one value."

    def solid(self, value: float, width: int, height: int):
        return (torch.full((1, height, width), value, dtype=torch.float32, device="cpu"),)


class InvertMask:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"mask": ("MASK",)}}

    RETURN_TYPES = ("MASK",)
    FUNCTION = "invert"
    CATEGORY = "mask"
    DESCRIPTION = "1 - mask."

    def invert(self, mask: torch.Tensor):
        return (1.0 - mask,)


class CropMask:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "mask": ("MASK",),
                "x": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 1}),
                "y": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 1}),
                "width": ("INT", {"default": 512, "min": 1, "max": MAX_RESOLUTION, "step": 1}),
                "height": ("INT", {"default": 512, "min": 1, "max": MAX_RESOLUTION, "step": 1}),
            }
        }

    RETURN_TYPES = ("MASK",)
    FUNCTION = "crop"
    CATEGORY = "mask"
    DESCRIPTION = "Cuts a rectangle out of the masks (clipped to the mask; it may come out empty)."

    def crop(self, mask: torch.Tensor, x: int, y: int, width: int, height: int):
        return (as_planes(mask)[:, y : y + height, x : x + width],)


def _combine(dst: torch.Tensor, src: torch.Tensor, operation: str) -> torch.Tensor:
    if operation == "multiply":
        return dst * src
    if operation == "add":
        return dst + src
    if operation == "subtract":
        return dst - src
    # The logic operations see each value rounded to 0 or 1.
    logic = {"and": torch.bitwise_and, "or": torch.bitwise_or, "xor": torch.bitwise_xor}[operation]
    return logic(dst.round().bool(), src.round().bool()).float()


class MaskComposite:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "destination": ("MASK",),
                "source": ("MASK",),
                "x": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 1}),
                "y": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 1}),
                "operation": (COMPOSITE_OPERATIONS,),
            }
        }

    RETURN_TYPES = ("MASK",)
    FUNCTION = "combine"
    CATEGORY = "mask"
    DESCRIPTION = (
        "Combines the source mask into the destination at (x, y) with an arithmetic or logic "
        "operation; the result is clamped to 0..1."
    )

    def combine(self, destination: torch.Tensor, source: torch.Tensor, x: int, y: int, operation: str):
        out = as_planes(destination).clone()
        source = as_planes(source)
        right = min(x + source.shape[-1], out.shape[-1])
        bottom = min(y + source.shape[-2], out.shape[-2])
        # As in ComfyUI, the source is cut to (right - x, bottom - y) even when that is negative (a paste
        # starting past the edge), which then fails to broadcast unless nothing is left of either side.
        src = source[:, : bottom - y, : right - x]
        out[:, y:bottom, x:right] = _combine(out[:, y:bottom, x:right], src, operation)
        return (torch.clamp(out, 0.0, 1.0),)


def _edge_ramps(length: int, near: int, far: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-index factors for the `near` ramp (index i < near gets (i+1)/near) and the `far` ramp (step k
    < far gets (k+1)/far at index -k, so step 0 lands on index 0, as in ComfyUI); 1 elsewhere."""
    near_f = torch.ones(length, dtype=torch.float32)
    far_f = torch.ones(length, dtype=torch.float32)
    for i in range(near):
        near_f[i] = (i + 1.0) / near
    for k in range(far):
        far_f[-k] = (k + 1) / far
    return near_f, far_f


class FeatherMask:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "mask": ("MASK",),
                "left": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 1}),
                "top": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 1}),
                "right": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 1}),
                "bottom": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 1}),
            }
        }

    RETURN_TYPES = ("MASK",)
    FUNCTION = "feather"
    CATEGORY = "mask"
    DESCRIPTION = "Fades the mask linearly towards zero over the given number of pixels at each edge."

    def feather(self, mask: torch.Tensor, left: int, top: int, right: int, bottom: int):
        out = as_planes(mask).clone()
        h, w = out.shape[-2], out.shape[-1]
        left_f, right_f = _edge_ramps(w, min(left, w), min(right, w))
        top_f, bottom_f = _edge_ramps(h, min(top, h), min(bottom, h))
        # One multiplication per ramp, in ComfyUI's order (left, right, top, bottom): the factors of a
        # corner pixel are applied one after another, never pre-multiplied, so the rounding is the same.
        out *= left_f.to(out.device)
        out *= right_f.to(out.device)
        out *= top_f.to(out.device).unsqueeze(-1)
        out *= bottom_f.to(out.device).unsqueeze(-1)
        return (out,)


def _grow_once(planes: torch.Tensor, shrink: bool, tapered: bool) -> torch.Tensor:
    """One step of grey dilation (or erosion) of [B,H,W] by the 3x3 square or, tapered, the 3x3 cross.

    Edge pixels count as their own outside neighbours (scipy's default 'reflect' border), which for a
    radius of one is the same as replicating the edge."""
    h, w = planes.shape[-2], planes.shape[-1]
    padded = F.pad(planes.unsqueeze(1), (1, 1, 1, 1), mode="replicate").squeeze(1)
    pick = torch.minimum if shrink else torch.maximum
    out = planes
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            if (dy == 0 and dx == 0) or (tapered and dy != 0 and dx != 0):
                continue
            out = pick(out, padded[:, 1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w])
    return out


class GrowMask:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "mask": ("MASK",),
                "expand": (
                    "INT",
                    {
                        "default": 0,
                        "min": -MAX_RESOLUTION,
                        "max": MAX_RESOLUTION,
                        "step": 1,
                        "tooltip": "Pixels to grow by (negative: shrink).",
                    },
                ),
                "tapered_corners": (
                    "BOOLEAN",
                    {"default": True, "tooltip": "Grow through edges only (a cross), rounding corners."},
                ),
            }
        }

    RETURN_TYPES = ("MASK",)
    FUNCTION = "expand_mask"
    CATEGORY = "mask"
    DESCRIPTION = "Grows (or shrinks) the mask one pixel at a time by taking the neighbourhood's max (min)."

    def expand_mask(self, mask: torch.Tensor, expand: int, tapered_corners: bool):
        out = as_planes(mask).cpu().clone()
        for _ in range(abs(expand)):
            out = _grow_once(out, expand < 0, tapered_corners)
        return (out,)


class ThresholdMask:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "mask": ("MASK",),
                "value": ("FLOAT", {"default": 0.5, "min": 0.0, "max": 1.0, "step": 0.01}),
            }
        }

    RETURN_TYPES = ("MASK",)
    FUNCTION = "image_to_mask"
    CATEGORY = "mask"
    DESCRIPTION = "1 where the mask is above the value, else 0."

    def image_to_mask(self, mask: torch.Tensor, value: float):
        return ((mask > value).float(),)


class MaskPreview(PreviewImage):
    RELATIVE_PYTHON_MODULE = MODULE
    compress_level = 4

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"mask": ("MASK",)}, "hidden": {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"}}

    # today's ComfyUI (comfy_extras/nodes_mask.py at d9ac00e2) passes the mask on, and the Anima LLLite inpainting
    # template wires that output into AnimaLLLiteApply; 0.3.64 and 0.10.0 had none (a prompt of theirs never links it)
    RETURN_TYPES = ("MASK",)
    RETURN_NAMES = ("mask",)
    FUNCTION = "execute"
    CATEGORY = "mask"
    DESCRIPTION = "Shows the masks in the UI as grey images."

    def execute(
        self,
        mask: torch.Tensor,
        filename_prefix: str = "ComfyUI",
        prompt: object = None,
        extra_pnginfo: dict | None = None,
    ):
        return {
            "ui": self.save_images(mask_to_rgb(mask), filename_prefix, prompt, extra_pnginfo)["ui"],
            "result": (mask,),
        }


NODE_CLASS_MAPPINGS = {
    "LatentCompositeMasked": LatentCompositeMasked,
    "ImageCompositeMasked": ImageCompositeMasked,
    "MaskToImage": MaskToImage,
    "ImageToMask": ImageToMask,
    "ImageColorToMask": ImageColorToMask,
    "SolidMask": SolidMask,
    "InvertMask": InvertMask,
    "CropMask": CropMask,
    "MaskComposite": MaskComposite,
    "FeatherMask": FeatherMask,
    "GrowMask": GrowMask,
    "ThresholdMask": ThresholdMask,
    "MaskPreview": MaskPreview,
}

NODE_DISPLAY_NAME_MAPPINGS = {
    "ImageToMask": "Convert Image to Mask",
    "MaskToImage": "Convert Mask to Image",
}
