"""ComfyUI's comfy_extras.nodes_post_processing: blend, blur, sharpen, quantize, scale to a pixel count.

IMAGE is float [B,H,W,C] in 0..1; the filters convolve channel-first. The operations follow ComfyUI's
order step by step (kernel built on linspace(-1, 1), reflect padding before a padded convolution, then
a crop) because the saved 8-bit pixels must be ComfyUI's, and a different float order can flip a rounding.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from nodes.upscale import common_upscale

MODULE = "comfy_extras.nodes_post_processing"
BLEND_MODES = ["normal", "multiply", "screen", "overlay", "soft_light", "difference"]
DITHERS = ["none", "floyd-steinberg", "bayer-2", "bayer-4", "bayer-8", "bayer-16"]


def _combo(options: list[str]) -> tuple[str, dict]:
    """A combo declared the way ComfyUI's V3 schema reports it in /object_info."""
    return ("COMBO", {"multiselect": False, "options": options})


def gaussian_kernel(kernel_size: int, sigma: float, device: torch.device | None = None) -> torch.Tensor:
    """Normalised 2-D gaussian over a kernel_size grid spanning -1..1 (not pixel units, as in ComfyUI)."""
    axis = torch.linspace(-1, 1, kernel_size, device=device)
    x, y = torch.meshgrid(axis, axis, indexing="ij")
    d = torch.sqrt(x * x + y * y)
    g = torch.exp(-(d * d) / (2.0 * sigma * sigma))
    return g / g.sum()


def _filter(image: torch.Tensor, kernel: torch.Tensor, radius: int) -> torch.Tensor:
    """Convolve IMAGE [B,H,W,C] per channel with a 2-D kernel: reflect-pad by radius, convolve with zero
    padding, then drop the radius again (ComfyUI's sequence)."""
    channels = image.shape[-1]
    weights = kernel.repeat(channels, 1, 1).unsqueeze(1)
    padded = F.pad(image.permute(0, 3, 1, 2), (radius, radius, radius, radius), "reflect")
    out = F.conv2d(padded, weights, padding=kernel.shape[-1] // 2, groups=channels)
    return out[:, :, radius:-radius, radius:-radius].permute(0, 2, 3, 1)


class ImageBlend:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image1": ("IMAGE", {}),
                "image2": ("IMAGE", {}),
                "blend_factor": ("FLOAT", {"default": 0.5, "min": 0.0, "max": 1.0, "step": 0.01}),
                "blend_mode": _combo(BLEND_MODES),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "blend_images"
    CATEGORY = "image/postprocessing"
    DESCRIPTION = (
        "Blends image2 onto image1 with a blend mode, mixed in by blend_factor; image2 is resized "
        "(bicubic, centre crop) to image1's size if they differ."
    )

    def blend_images(self, image1: torch.Tensor, image2: torch.Tensor, blend_factor: float, blend_mode: str):
        # Channel counts: extra channels of image2 are dropped, a missing alpha on image1 is added opaque.
        if image1.shape[-1] < image2.shape[-1]:
            image2 = image2[..., : image1.shape[-1]]
        elif image1.shape[-1] > image2.shape[-1]:
            image1 = F.pad(image1, (0, 1))
            image1[..., -1] = 1.0
        if image1.shape != image2.shape:
            image2 = common_upscale(
                image2.permute(0, 3, 1, 2), image1.shape[2], image1.shape[1], "bicubic", "center"
            ).permute(0, 2, 3, 1)
        blended = self.blend_mode(image1, image2, blend_mode)
        blended = image1 * (1 - blend_factor) + blended * blend_factor
        return (torch.clamp(blended, 0, 1),)

    @staticmethod
    def blend_mode(img1: torch.Tensor, img2: torch.Tensor, mode: str) -> torch.Tensor:
        if mode == "normal":
            return img2
        if mode == "multiply":
            return img1 * img2
        if mode == "screen":
            return 1 - (1 - img1) * (1 - img2)
        if mode == "overlay":
            return torch.where(img1 <= 0.5, 2 * img1 * img2, 1 - 2 * (1 - img1) * (1 - img2))
        if mode == "soft_light":
            # The W3C soft-light curve: D(x) is a cubic below 0.25 and sqrt(x) above.
            d = torch.where(img1 <= 0.25, ((16 * img1 - 12) * img1 + 4) * img1, torch.sqrt(img1))
            return torch.where(
                img2 <= 0.5, img1 - (1 - 2 * img2) * img1 * (1 - img1), img1 + (2 * img2 - 1) * (d - img1)
            )
        if mode == "difference":
            return img1 - img2
        raise ValueError(f"Unsupported blend mode: {mode}")


class ImageBlur:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE", {}),
                "blur_radius": ("INT", {"default": 1, "min": 1, "max": 31, "step": 1}),
                "sigma": ("FLOAT", {"default": 1.0, "min": 0.1, "max": 10.0, "step": 0.1}),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "blur"
    CATEGORY = "image/postprocessing"
    DESCRIPTION = (
        "Gaussian blur over a (2 * radius + 1) square; sigma is relative to the radius "
        "(the kernel spans -1..1), edges are reflected."
    )

    def blur(self, image: torch.Tensor, blur_radius: int, sigma: float):
        if blur_radius == 0:
            return (image,)
        kernel = gaussian_kernel(blur_radius * 2 + 1, sigma, device=image.device)
        return (_filter(image, kernel, blur_radius),)


def _bayer_matrix(n: int) -> np.ndarray:
    """The normalised 2^n x 2^n ordered-dither matrix, centred on 0 (float32 throughout, as ComfyUI's)."""
    if n == 0:
        return np.zeros((1, 1), "float32")
    q = 4**n
    m = q * _bayer_matrix(n - 1)
    return np.block([[m - 1.5, m + 0.5], [m + 1.5, m - 0.5]]) / q


class ImageQuantize:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE", {}),
                "colors": ("INT", {"default": 256, "min": 1, "max": 256, "step": 1}),
                "dither": _combo(DITHERS),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "quantize"
    CATEGORY = "image/postprocessing"
    DESCRIPTION = (
        "Reduces each image to a palette of at most `colors` colours (Pillow's median cut), "
        "with no, Floyd-Steinberg or ordered (Bayer) dithering."
    )

    @staticmethod
    def bayer(im: Image.Image, palette: Image.Image, order: int) -> Image.Image:
        """Ordered dither: add a tiled Bayer offset scaled to the palette's spacing, then map to the palette."""
        spread = 2 * 256 / (len(palette.getpalette()) // 3)
        matrix = torch.from_numpy(spread * _bayer_matrix(int(math.log2(order))) + 0.5)
        pixels = torch.from_numpy(np.array(im).astype(np.float32))
        reps_h = math.ceil(pixels.shape[0] / matrix.shape[0])
        reps_w = math.ceil(pixels.shape[1] / matrix.shape[1])
        tiled = matrix.tile(reps_h, reps_w).unsqueeze(-1)
        pixels.add_(tiled[: pixels.shape[0], : pixels.shape[1]]).clamp_(0, 255)
        return Image.fromarray(pixels.to(dtype=torch.uint8).numpy()).quantize(palette=palette, dither=Image.Dither.NONE)

    def quantize(self, image: torch.Tensor, colors: int, dither: str):
        result = torch.zeros_like(image)
        for b in range(image.shape[0]):
            im = Image.fromarray((image[b] * 255).to(torch.uint8).numpy(), mode="RGB")
            # The palette comes from a plain quantize; dithering then maps onto it (Pillow issue 5836).
            palette = im.quantize(colors=colors)
            if dither == "none":
                out = im.quantize(palette=palette, dither=Image.Dither.NONE)
            elif dither == "floyd-steinberg":
                out = im.quantize(palette=palette, dither=Image.Dither.FLOYDSTEINBERG)
            elif dither.startswith("bayer"):
                out = self.bayer(im, palette, int(dither.split("-")[-1]))
            else:
                # ComfyUI's schema does not check combo values, and an unknown dither reaches its unset
                # result variable; the same error keeps such prompts failing the same way.
                raise UnboundLocalError(
                    "cannot access local variable 'quantized_image' where it is not associated with a value"
                )
            result[b] = torch.tensor(np.array(out.convert("RGB"))).float() / 255
        return (result,)


class ImageSharpen:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE", {}),
                "sharpen_radius": ("INT", {"default": 1, "min": 1, "max": 31, "step": 1}),
                "sigma": ("FLOAT", {"default": 1.0, "min": 0.1, "max": 10.0, "step": 0.01}),
                "alpha": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 5.0, "step": 0.01}),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "sharpen"
    CATEGORY = "image/postprocessing"
    DESCRIPTION = (
        "Unsharp-style sharpening: subtracts alpha x 10 times a gaussian of the neighbourhood, "
        "keeping the kernel's sum at 1; edges are reflected."
    )

    def sharpen(self, image: torch.Tensor, sharpen_radius: int, sigma: float, alpha: float):
        if sharpen_radius == 0:
            return (image,)
        size = sharpen_radius * 2 + 1
        kernel = (gaussian_kernel(size, sigma, device=image.device) * -(alpha * 10)).to(dtype=image.dtype)
        center = size // 2
        kernel[center, center] = kernel[center, center] - kernel.sum() + 1.0
        return (torch.clamp(_filter(image, kernel, sharpen_radius), 0, 1),)


class ImageScaleToTotalPixels:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE", {}),
                "upscale_method": _combo(["nearest-exact", "bilinear", "area", "bicubic", "lanczos"]),
                "megapixels": ("FLOAT", {"default": 1.0, "min": 0.01, "max": 16.0, "step": 0.01}),
            },
            # today's ComfyUI (0.10.0 on): sides rounded to multiples of this; optional here, so 0.3.64's prompts,
            # which lack it, keep 0.3.64's sizes
            "optional": {"resolution_steps": ("INT", {"default": 1, "min": 1, "max": 256})},
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "upscale"
    CATEGORY = "image/upscaling"
    DESCRIPTION = "Resizes the image to about `megapixels` x 1024 x 1024 pixels, keeping the aspect ratio."

    def upscale(self, image: torch.Tensor, upscale_method: str, megapixels: float, resolution_steps: int | None = None):
        samples = image.movedim(-1, 1)
        if resolution_steps is None:  # 0.3.64: a whole number of pixels, sides rounded to single pixels
            total, steps = int(megapixels * 1024 * 1024), 1
        else:
            if not isinstance(resolution_steps, int) or not 1 <= resolution_steps <= 256:
                raise ValueError(f"resolution_steps: {resolution_steps!r} is not an integer in 1..256")
            total, steps = megapixels * 1024 * 1024, resolution_steps
        scale_by = math.sqrt(total / (samples.shape[3] * samples.shape[2]))
        width = round(samples.shape[3] * scale_by / steps) * steps
        height = round(samples.shape[2] * scale_by / steps) * steps
        return (common_upscale(samples, width, height, upscale_method, "disabled").movedim(1, -1),)


NODE_CLASS_MAPPINGS = {
    "ImageBlend": ImageBlend,
    "ImageBlur": ImageBlur,
    "ImageQuantize": ImageQuantize,
    "ImageSharpen": ImageSharpen,
    "ImageScaleToTotalPixels": ImageScaleToTotalPixels,
}

NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
