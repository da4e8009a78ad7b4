"""Today's ComfyUI Crop Image to Mask (`comfy_extras.nodes_images`, added after 0.3.64): cuts each image to its
mask's subject (the bounding box of the confident mask pixels, grown to the output's aspect ratio and a
margin), puts the subject on a plain background and resizes it: the input the 3D image-to-model pipelines
(Trellis 2, Pixal3D, Hunyuan3D) expect."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from nodes.library.color import parse_color
from nodes.upscale import common_upscale

THRESHOLD = 0.05  # mask values below this count as background
CONFIDENT = 204  # of 255: the pixels whose bounding box is the subject


def _looks_inverted(mask: torch.Tensor) -> bool:
    """A mask whose border is mostly set and whose centre is mostly not marks the background, not the subject."""
    h, w = mask.shape
    border = torch.cat([mask[0], mask[-1], mask[:, 0], mask[:, -1]])
    centre = mask[h // 4 : h - h // 4, w // 4 : w - w // 4]
    return float(border.mean()) > 0.5 and float(centre.mean()) < 0.5


def _grow(mask: torch.Tensor, pixels: int) -> torch.Tensor:
    """[1,1,H,W] dilated (pixels > 0) or eroded (< 0) by a square of that radius."""
    if pixels == 0:
        return mask
    r = abs(pixels)
    pooled = F.max_pool2d(mask if pixels > 0 else 1.0 - mask, kernel_size=2 * r + 1, stride=1, padding=r)
    return pooled if pixels > 0 else 1.0 - pooled


def _crop_box(mask: torch.Tensor, aspect: float, pad: float) -> tuple[int, int, int, int] | None:
    """(x1, y1, x2, y2) around the confident pixels, at the aspect ratio, times the margin; None if there are none."""
    confident = ((mask.clamp(0, 1) * 255.0).to(torch.uint8) > CONFIDENT).nonzero()
    if confident.numel() == 0:
        return None
    (y_min, x_min), (y_max, x_max) = confident.min(dim=0).values.tolist(), confident.max(dim=0).values.tolist()
    box_w, box_h = x_max - x_min + 1, y_max - y_min + 1
    if box_w / max(box_h, 1) >= aspect:
        crop_w, crop_h = int(box_w * pad), int(box_w / aspect * pad)
    else:
        crop_w, crop_h = int(box_h * aspect * pad), int(box_h * pad)
    half_w, half_h = math.ceil(crop_w / 2), math.ceil(crop_h / 2)
    x1, y1 = int((x_min + x_max) / 2 - half_w), int((y_min + y_max) / 2 - half_h)
    return x1, y1, x1 + 2 * half_w, y1 + 2 * half_h


def crop_to_mask(
    image: torch.Tensor,
    mask: torch.Tensor,
    width: int,
    height: int,
    pad: float,
    grow: int,
    background: tuple[float, float, float],
) -> torch.Tensor:
    """One [H,W,3] image and [H,W] mask -> the [1,height,width,3] subject on the background."""
    img = image.permute(2, 0, 1)[None].float().clamp(0, 1)
    m = mask[None, None].float().clamp(0, 1)
    if _looks_inverted(m[0, 0]):
        m = 1.0 - m
    m = _grow(m, grow)
    m = torch.where(m < THRESHOLD, torch.zeros_like(m), m)
    h, w = img.shape[-2:]
    longest = max(width, height)
    if max(h, w) > longest:  # work at most at the output's size
        scale = longest / max(h, w)
        w, h = int(w * scale), int(h * scale)
        img, m = common_upscale(img, w, h, "lanczos", "disabled"), common_upscale(m, w, h, "lanczos", "disabled")
    box = _crop_box(m[0, 0], width / height, pad)
    if box is None and ((255 - (m[0, 0] * 255.0).to(torch.uint8)) > CONFIDENT).any():
        m = 1.0 - m  # the inversion test above was too cautious: the subject is the unset part
        box = _crop_box(m[0, 0], width / height, pad)
    x1, y1, x2, y2 = box if box is not None else (0, 0, w, h)
    # a box past the image takes zeros there (transparent, so the background shows)
    pads = (max(0, -x1), max(0, x2 - w), max(0, -y1), max(0, y2 - h))
    img, m = F.pad(img, pads, value=0.0), F.pad(m, pads, value=0.0)
    x1, x2, y1, y2 = x1 + pads[0], x2 + pads[0], y1 + pads[2], y2 + pads[2]
    img, m = img[..., y1:y2, x1:x2], m[..., y1:y2, x1:x2]
    bg = torch.tensor(background, dtype=img.dtype).view(1, 3, 1, 1)
    composite = (img * m + bg * (1.0 - m)).clamp(0, 1)
    return common_upscale(composite, width, height, "lanczos", "disabled").movedim(1, -1)


def background_rgb(color: str) -> tuple[float, float, float]:
    """RRGGBB (with or without '#') as 0..1 levels; anything else is black, as in ComfyUI."""
    try:
        rgb = parse_color("#" + color.lstrip("#"))[0] if len(color.lstrip("#")) == 6 else 0
    except ValueError:
        rgb = 0
    return ((rgb >> 16) / 255.0, ((rgb >> 8) & 255) / 255.0, (rgb & 255) / 255.0)


class ImageCropToMask:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_images"
    FUNCTION = "execute"
    CATEGORY = "image/transform"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": ("IMAGE", {}),
                "masks": ("MASK", {}),
                "width": ("INT", {"default": 1024, "min": 64, "max": 4096, "step": 8, "tooltip": "Output width."}),
                "height": ("INT", {"default": 1024, "min": 64, "max": 4096, "step": 8, "tooltip": "Output height."}),
                "pad_factor": (
                    "FLOAT",
                    {
                        "default": 1.0,
                        "min": 1.0,
                        "max": 2.0,
                        "step": 0.01,
                        "tooltip": "The margin around the subject, as a factor of its size.",
                    },
                ),
                "grow_mask": (
                    "INT",
                    {
                        "default": 0,
                        "min": -32,
                        "max": 32,
                        "step": 1,
                        "tooltip": "Pixels the mask grows (or, negative, shrinks) before cutting.",
                    },
                ),
                "background": ("COLOR", {"default": "#000000", "tooltip": "The colour behind the subject."}),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    RETURN_NAMES = ("images",)
    OUTPUT_TOOLTIPS = (None,)
    SEARCH_ALIASES = [
        "crop to mask",
        "mask crop",
        "crop mask",
        "mask crop resize",
        "crop mask resize",
        "trellis2",
        "pixal3d",
    ]
    DESCRIPTION = "Cuts each image to its mask's subject, on a plain background, at the output size."

    def execute(
        self,
        images: torch.Tensor,
        masks: torch.Tensor,
        width: int,
        height: int,
        pad_factor: float,
        grow_mask: int,
        background: str,
    ):
        images = images[..., :3]
        if masks.shape[0] == 1 and images.shape[0] > 1:
            masks = masks.expand(images.shape[0], -1, -1)
        elif masks.shape[0] != images.shape[0]:
            raise ValueError(f"Crop Image to Mask: {masks.shape[0]} masks for {images.shape[0]} images")
        if masks.shape[-2:] != images.shape[1:3]:
            masks = common_upscale(masks[:, None].float(), images.shape[2], images.shape[1], "bilinear", "disabled")[
                :, 0
            ]
        rgb = background_rgb(background)
        return (
            torch.cat([crop_to_mask(i, m, width, height, pad_factor, grow_mask, rgb) for i, m in zip(images, masks)]),
        )


NODE_CLASS_MAPPINGS = {"ImageCropToMask": ImageCropToMask}
NODE_DISPLAY_NAME_MAPPINGS = {"ImageCropToMask": "Crop Image to Mask"}
