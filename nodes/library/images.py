"""ComfyUI's comfy_extras.nodes_images: crop, flip, rotate, stitch, pad, batch picks, noise, size, and the
animated PNG/WEBP writers.

IMAGE is float [B,H,W,C] in 0..1. The animated writers follow SaveImage's file naming
(`<prefix>_<counter:05>_.png|.webp` in the output folder) and hand the files to Pillow as ComfyUI does.
"""

from __future__ import annotations

import json
import os
from typing import Any

import torch
from PIL.PngImagePlugin import PngInfo

from nodes import image_io
from nodes.image_io import save_image_path, to_pil
from nodes.upscale import common_upscale
from nodes.workspace import active

MAX_RESOLUTION = 16384
MODULE = "comfy_extras.nodes_images"


def _resize(image: torch.Tensor, width: int, height: int, method: str) -> torch.Tensor:
    """IMAGE [B,H,W,C] resized (no crop) through the channel-first upscaler."""
    return common_upscale(image.movedim(-1, 1), width, height, method, "disabled").movedim(1, -1)


class ImageCrop:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE",),
                "width": ("INT", {"default": 512, "min": 1, "max": MAX_RESOLUTION, "step": 1}),
                "height": ("INT", {"default": 512, "min": 1, "max": MAX_RESOLUTION, "step": 1}),
                "x": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 1}),
                "y": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 1}),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "crop"
    CATEGORY = "image/transform"
    DESCRIPTION = (
        "Cuts a width x height window starting at (x, y); an origin past the edge is moved onto "
        "the last row/column and the window is clipped to the image."
    )

    def crop(self, image: torch.Tensor, width: int, height: int, x: int, y: int):
        x = min(x, image.shape[2] - 1)
        y = min(y, image.shape[1] - 1)
        return (image[:, y : y + height, x : x + width, :],)


class RepeatImageBatch:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",), "amount": ("INT", {"default": 1, "min": 1, "max": 4096})}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "repeat"
    CATEGORY = "image/batch"
    DESCRIPTION = "Repeats the whole batch `amount` times."

    def repeat(self, image: torch.Tensor, amount: int):
        return (image.repeat((amount, 1, 1, 1)),)


class ImageFromBatch:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE",),
                # today's ComfyUI: a negative index counts from the end (the SCAIL-2 templates take -1, the last)
                "batch_index": ("INT", {"default": 0, "min": -MAX_RESOLUTION, "max": MAX_RESOLUTION}),
                "length": ("INT", {"default": 1, "min": 1, "max": 4096}),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "frombatch"
    CATEGORY = "image/batch"
    DESCRIPTION = (
        "Takes `length` images from the batch starting at batch_index (negative: counted from the end; both "
        "clamped to the batch)."
    )

    def frombatch(self, image: torch.Tensor, batch_index: int, length: int):
        if batch_index < 0:
            batch_index += image.shape[0]
        start = max(0, min(image.shape[0] - 1, batch_index))
        length = min(image.shape[0] - start, length)
        return (image[start : start + length].clone(),)


class ImageAddNoise:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE",),
                "seed": (
                    "INT",
                    {
                        "default": 0,
                        "min": 0,
                        "max": 0xFFFFFFFFFFFFFFFF,
                        "control_after_generate": True,
                        "tooltip": "Seed of the CPU generator that draws the noise.",
                    },
                ),
                "strength": ("FLOAT", {"default": 0.5, "min": 0.0, "max": 1.0, "step": 0.01}),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "repeat"
    CATEGORY = "image"
    DESCRIPTION = "Adds seeded gaussian noise times strength, clipped to 0..1."

    def repeat(self, image: torch.Tensor, seed: int, strength: float):
        # The noise is drawn on the CPU from the global-style generator seeded like torch.manual_seed,
        # so the same seed gives ComfyUI's noise.
        generator = torch.Generator("cpu").manual_seed(seed)
        noise = torch.randn(image.size(), generator=generator, device="cpu").to(image)
        return (torch.clip(image + strength * noise, min=0.0, max=1.0),)


def _frames(images: torch.Tensor) -> list:
    return [to_pil(image) for image in images]


class SaveAnimatedWEBP:
    RELATIVE_PYTHON_MODULE = MODULE
    methods = {"default": 4, "fastest": 0, "slowest": 6}

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": ("IMAGE",),
                "filename_prefix": ("STRING", {"default": "ComfyUI"}),
                "fps": ("FLOAT", {"default": 6.0, "min": 0.01, "max": 1000.0, "step": 0.01}),
                "lossless": ("BOOLEAN", {"default": True}),
                "quality": ("INT", {"default": 80, "min": 0, "max": 100}),
                "method": (list(cls.methods.keys()),),
            },
            "hidden": {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"},
        }

    RETURN_TYPES = ()
    FUNCTION = "save_images"
    OUTPUT_NODE = True
    CATEGORY = "image/animation"
    DESCRIPTION = (
        "Writes the batch as one animated WEBP into the output folder; the prompt and workflow go into EXIF tags."
    )

    def save_images(
        self,
        images: torch.Tensor,
        fps: float,
        filename_prefix: str,
        lossless: bool,
        quality: int,
        method: str,
        prompt: Any = None,
        extra_pnginfo: dict | None = None,
    ):
        folder, stem, counter, subfolder, _ = save_image_path(
            filename_prefix, active().output_dir, images[0].shape[1], images[0].shape[0]
        )
        frames = _frames(images)
        exif = frames[0].getexif()
        if image_io.metadata_enabled():
            # ComfyUI's tags: 0x0110 (Model) holds the prompt, then 0x010f downwards one per pnginfo key.
            if prompt is not None:
                exif[0x0110] = f"prompt:{json.dumps(prompt)}"
            if extra_pnginfo is not None:
                tag = 0x010F
                for key, value in extra_pnginfo.items():
                    exif[tag] = f"{key}:{json.dumps(value)}"
                    tag -= 1
        file = f"{stem}_{counter:05}_.webp"
        frames[0].save(
            os.path.join(folder, file),
            save_all=True,
            duration=int(1000.0 / fps),
            append_images=frames[1:],
            exif=exif,
            lossless=lossless,
            quality=quality,
            method=self.methods.get(method),
        )
        # ComfyUI marks a single-file save as animated unless it holds exactly one frame per file.
        animated = len(frames) != 1
        return {
            "ui": {"images": [{"filename": file, "subfolder": subfolder, "type": "output"}], "animated": (animated,)}
        }


class SaveAnimatedPNG:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": ("IMAGE",),
                "filename_prefix": ("STRING", {"default": "ComfyUI"}),
                "fps": ("FLOAT", {"default": 6.0, "min": 0.01, "max": 1000.0, "step": 0.01}),
                "compress_level": ("INT", {"default": 4, "min": 0, "max": 9}),
            },
            "hidden": {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"},
        }

    RETURN_TYPES = ()
    FUNCTION = "save_images"
    OUTPUT_NODE = True
    CATEGORY = "image/animation"
    DESCRIPTION = (
        "Writes the batch as one animated PNG (APNG) into the output folder; the prompt and workflow "
        "go into 'comf' chunks after the image data."
    )

    def save_images(
        self,
        images: torch.Tensor,
        fps: float,
        compress_level: int,
        filename_prefix: str = "ComfyUI",
        prompt: Any = None,
        extra_pnginfo: dict | None = None,
    ):
        folder, stem, counter, subfolder, _ = save_image_path(
            filename_prefix, active().output_dir, images[0].shape[1], images[0].shape[0]
        )
        frames = _frames(images)
        info = None
        if image_io.metadata_enabled():
            info = PngInfo()
            if prompt is not None:
                info.add(b"comf", b"prompt\0" + json.dumps(prompt).encode("latin-1", "strict"), after_idat=True)
            for key, value in (extra_pnginfo or {}).items():
                info.add(
                    b"comf",
                    key.encode("latin-1", "strict") + b"\0" + json.dumps(value).encode("latin-1", "strict"),
                    after_idat=True,
                )
        file = f"{stem}_{counter:05}_.png"
        frames[0].save(
            os.path.join(folder, file),
            pnginfo=info,
            compress_level=compress_level,
            save_all=True,
            duration=int(1000.0 / fps),
            append_images=frames[1:],
        )
        return {"ui": {"images": [{"filename": file, "subfolder": subfolder, "type": "output"}], "animated": (True,)}}


STITCH_COLORS: dict[str, float | tuple[float, float, float]] = {
    "white": 1.0,
    "black": 0.0,
    "red": (1.0, 0.0, 0.0),
    "green": (0.0, 1.0, 0.0),
    "blue": (0.0, 0.0, 1.0),
}


def _pad_centered(image: torch.Tensor, dim: int, size: int, value: float) -> torch.Tensor:
    """Pad image dimension `dim` (1 = height, 2 = width) to `size`, the extra split half before, half after."""
    extra = size - image.shape[dim]
    if extra <= 0:
        return image
    before, after = extra // 2, extra - extra // 2
    pad = (0, 0, before, after) if dim == 2 else (0, 0, 0, 0, before, after)
    return torch.nn.functional.pad(image, pad, mode="constant", value=value)


def _with_channels(image: torch.Tensor, channels: int) -> torch.Tensor:
    """Append channels of ones (opaque alpha) up to `channels`."""
    if image.shape[-1] >= channels:
        return image
    ones = torch.ones(*image.shape[:-1], channels - image.shape[-1], device=image.device)
    return torch.cat([image, ones], dim=-1)


class ImageStitch:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image1": ("IMAGE",),
                "direction": (["right", "down", "left", "up"], {"default": "right"}),
                "match_image_size": ("BOOLEAN", {"default": True}),
                "spacing_width": ("INT", {"default": 0, "min": 0, "max": 1024, "step": 2}),
                "spacing_color": (list(STITCH_COLORS), {"default": "white"}),
            },
            "optional": {"image2": ("IMAGE",)},
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "stitch"
    CATEGORY = "image/transform"
    DESCRIPTION = (
        "Places image2 beside image1 in the given direction, optionally resized (lanczos) to share "
        "image1's height or width, with an optional coloured gap. Without image2, image1 passes."
    )

    def stitch(
        self,
        image1: torch.Tensor,
        direction: str,
        match_image_size: bool,
        spacing_width: int,
        spacing_color: str,
        image2: torch.Tensor | None = None,
    ):
        if image2 is None:
            return (image1,)
        # The shorter batch repeats its last image.
        batch = max(image1.shape[0], image2.shape[0])
        if image1.shape[0] < batch:
            image1 = torch.cat([image1, image1[-1:].repeat(batch - image1.shape[0], 1, 1, 1)])
        if image2.shape[0] < batch:
            image2 = torch.cat([image2, image2[-1:].repeat(batch - image2.shape[0], 1, 1, 1)])
        horizontal = direction in ("left", "right")
        color = STITCH_COLORS[spacing_color]
        if match_image_size:
            h1, w1 = image1.shape[1:3]
            h2, w2 = image2.shape[1:3]
            aspect = w2 / h2
            if horizontal:
                width, height = int(h1 * aspect), h1
            else:
                width, height = w1, int(w1 / aspect)
            image2 = _resize(image2, width, height, "lanczos")
        else:
            # A colour triple pads with black; only a grey level pads with itself.
            value = 0.0 if isinstance(color, tuple) else color
            dim = 1 if horizontal else 2
            size = max(image1.shape[dim], image2.shape[dim])
            image1, image2 = _pad_centered(image1, dim, size, value), _pad_centered(image2, dim, size, value)
        channels = max(image1.shape[-1], image2.shape[-1])
        image1, image2 = _with_channels(image1, channels), _with_channels(image2, channels)
        parts = [image2, image1] if direction in ("left", "up") else [image1, image2]
        if spacing_width > 0:
            spacing_width += spacing_width % 2
            if horizontal:
                shape = (image1.shape[0], max(image1.shape[1], image2.shape[1]), spacing_width, channels)
            else:
                shape = (image1.shape[0], spacing_width, max(image1.shape[2], image2.shape[2]), channels)
            gap = torch.full(shape, 0.0, device=image1.device)
            if isinstance(color, tuple):
                for i, c in enumerate(color[:channels]):
                    gap[..., i] = c
            else:
                gap[..., : min(3, channels)] = color
            if channels == 4:
                gap[..., 3] = 1.0
            parts.insert(1, gap)
        return (torch.cat(parts, dim=2 if horizontal else 1),)


class ResizeAndPadImage:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE",),
                "target_width": ("INT", {"default": 512, "min": 1, "max": MAX_RESOLUTION, "step": 1}),
                "target_height": ("INT", {"default": 512, "min": 1, "max": MAX_RESOLUTION, "step": 1}),
                "padding_color": (["white", "black"],),
                "interpolation": (["area", "bicubic", "nearest-exact", "bilinear", "lanczos"],),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "resize_and_pad"
    CATEGORY = "image/transform"
    DESCRIPTION = (
        "Fits the image inside the target size keeping its aspect ratio and centres it on a white or black canvas."
    )

    def resize_and_pad(
        self, image: torch.Tensor, target_width: int, target_height: int, padding_color: str, interpolation: str
    ):
        batch, height, width, channels = image.shape
        scale = min(target_width / width, target_height / height)
        new_width, new_height = int(width * scale), int(height * scale)
        resized = common_upscale(image.permute(0, 3, 1, 2), new_width, new_height, interpolation, "disabled")
        canvas = torch.full(
            (batch, channels, target_height, target_width),
            0.0 if padding_color == "black" else 1.0,
            dtype=image.dtype,
            device=image.device,
        )
        top, left = (target_height - new_height) // 2, (target_width - new_width) // 2
        canvas[:, :, top : top + new_height, left : left + new_width] = resized
        return (canvas.permute(0, 2, 3, 1),)


class GetImageSize:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}, "hidden": {"unique_id": "UNIQUE_ID"}}

    RETURN_TYPES = ("INT", "INT", "INT")
    RETURN_NAMES = ("width", "height", "batch_size")
    FUNCTION = "get_size"
    CATEGORY = "image"
    DESCRIPTION = "Outputs the width, height and batch size of the image."

    def get_size(self, image: torch.Tensor, unique_id: str | None = None):
        return image.shape[2], image.shape[1], image.shape[0]


class ImageRotate:
    RELATIVE_PYTHON_MODULE = MODULE
    TURNS = {"none": 0, "90 degrees": 1, "180 degrees": 2, "270 degrees": 3}

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",), "rotation": (list(cls.TURNS),)}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "rotate"
    CATEGORY = "image/transform"
    DESCRIPTION = "Rotates the image clockwise by a multiple of 90 degrees."

    def rotate(self, image: torch.Tensor, rotation: str):
        # dims (W, H): a positive turn goes clockwise on screen.
        return (torch.rot90(image, k=self.TURNS.get(rotation, 0), dims=[2, 1]),)


class ImageFlip:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",), "flip_method": (["x-axis: vertically", "y-axis: horizontally"],)}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "flip"
    CATEGORY = "image/transform"
    DESCRIPTION = "Mirrors the image top-bottom (about the x axis) or left-right (about the y axis)."

    def flip(self, image: torch.Tensor, flip_method: str):
        if flip_method.startswith("x"):
            image = torch.flip(image, dims=[1])
        elif flip_method.startswith("y"):
            image = torch.flip(image, dims=[2])
        return (image,)


class ImageScaleToMaxDimension:
    RELATIVE_PYTHON_MODULE = MODULE
    # ComfyUI lists bilinear twice; the list is its interface, kept as is.
    upscale_methods = ["area", "lanczos", "bilinear", "nearest-exact", "bilinear", "bicubic"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE",),
                "upscale_method": (cls.upscale_methods,),
                "largest_size": ("INT", {"default": 512, "min": 0, "max": MAX_RESOLUTION, "step": 1}),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "upscale"
    CATEGORY = "image/upscaling"
    DESCRIPTION = "Resizes the image so its longer side is largest_size, keeping the aspect ratio."

    def upscale(self, image: torch.Tensor, upscale_method: str, largest_size: int):
        height, width = image.shape[1], image.shape[2]
        if height > width:
            width, height = round((width / height) * largest_size), largest_size
        elif width > height:
            width, height = largest_size, round((height / width) * largest_size)
        else:
            width = height = largest_size
        return (_resize(image, width, height, upscale_method),)


NODE_CLASS_MAPPINGS = {
    "ImageCrop": ImageCrop,
    "RepeatImageBatch": RepeatImageBatch,
    "ImageFromBatch": ImageFromBatch,
    "ImageAddNoise": ImageAddNoise,
    "SaveAnimatedWEBP": SaveAnimatedWEBP,
    "SaveAnimatedPNG": SaveAnimatedPNG,
    "ImageStitch": ImageStitch,
    "ResizeAndPadImage": ResizeAndPadImage,
    "GetImageSize": GetImageSize,
    "ImageRotate": ImageRotate,
    "ImageFlip": ImageFlip,
    "ImageScaleToMaxDimension": ImageScaleToMaxDimension,
}

NODE_DISPLAY_NAME_MAPPINGS = {
    "ImageCrop": "Image Crop",
    "ImageStitch": "Image Stitch",
    "GetImageSize": "Get Image Size",
}
