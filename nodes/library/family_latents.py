"""Model-free nodes of model families, as ComfyUI has them: the empty latents of Mochi (`comfy_extras.nodes_mochi`),
Cosmos (`nodes_cosmos`), Stable Cascade (`nodes_stable_cascade`), Hunyuan Image 2.1 (`nodes_hunyuan`, with its
refiner's latent node) and Qwen-Image-Layered (`nodes_qwen`), Stable Cascade's stage B conditioning and the SD x4
upscaler's conditioning (`nodes_sdupscale`). They only shape tensors and conditioning entries, so workflows of those
families validate and their latents can be batched, cut or saved here; sampling them needs the family's model."""

from __future__ import annotations

import torch

from nodes.upscale import common_upscale

MAX_RESOLUTION = 16384


def _size(default: int, minimum: int, step: int) -> tuple:
    return ("INT", {"default": default, "min": minimum, "max": MAX_RESOLUTION, "step": step})


BATCH = ("INT", {"default": 1, "min": 1, "max": 4096})


class _EmptyVideoLatent:
    """Zeros of [batch, CHANNELS, (length - 1) // FRAMES + 1, height // 8, width // 8]."""

    FUNCTION = "execute"
    CATEGORY = "latent/video"
    RETURN_TYPES = ("LATENT",)
    CHANNELS, FRAMES = 0, 1
    DEFAULTS: tuple[int, int, int, int] = (0, 0, 0, 0)  # width, height, length, length's minimum

    @classmethod
    def INPUT_TYPES(cls):
        width, height, length, shortest = cls.DEFAULTS
        return {
            "required": {
                "width": _size(width, 16, 16),
                "height": _size(height, 16, 16),
                "length": ("INT", {"default": length, "min": shortest, "max": MAX_RESOLUTION, "step": cls.FRAMES}),
                "batch_size": BATCH,
            }
        }

    def execute(self, width: int, height: int, length: int, batch_size: int = 1):
        frames = (length - 1) // self.FRAMES + 1
        return ({"samples": torch.zeros(batch_size, self.CHANNELS, frames, height // 8, width // 8)},)


class EmptyMochiLatentVideo(_EmptyVideoLatent):
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_mochi"
    CHANNELS, FRAMES, DEFAULTS = 12, 6, (848, 480, 25, 7)
    DESCRIPTION = "An all-zero Mochi video latent: 12 channels, 1 + (length - 1) / 6 frames, 1/8 of the size."


class EmptyCosmosLatentVideo(_EmptyVideoLatent):
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_cosmos"
    CHANNELS, FRAMES, DEFAULTS = 16, 8, (1280, 704, 121, 1)
    DESCRIPTION = "An all-zero Cosmos video latent: 16 channels, 1 + (length - 1) / 8 frames, 1/8 of the size."


class EmptyHunyuanImageLatent:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_hunyuan"
    FUNCTION = "execute"
    CATEGORY = "latent"
    RETURN_TYPES = ("LATENT",)
    DESCRIPTION = "An all-zero Hunyuan Image 2.1 latent: 64 channels at 1/32 of the size."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"width": _size(2048, 64, 32), "height": _size(2048, 64, 32), "batch_size": BATCH}}

    def execute(self, width: int, height: int, batch_size: int = 1):
        return ({"samples": torch.zeros(batch_size, 64, height // 32, width // 32)},)


class EmptyQwenImageLayeredLatentImage:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_qwen"
    FUNCTION = "execute"
    CATEGORY = "latent/qwen"
    RETURN_TYPES = ("LATENT",)
    DESCRIPTION = "An all-zero Qwen-Image-Layered latent: 16 channels at 1/8 of the size, layers + 1 frames."

    @classmethod
    def INPUT_TYPES(cls):
        layers = ("INT", {"default": 3, "min": 0, "max": MAX_RESOLUTION, "step": 1})
        return {
            "required": {
                "width": _size(640, 16, 16),
                "height": _size(640, 16, 16),
                "layers": layers,
                "batch_size": BATCH,
            }
        }

    def execute(self, width: int, height: int, layers: int, batch_size: int = 1):
        return ({"samples": torch.zeros(batch_size, 16, layers + 1, height // 8, width // 8)},)


class StableCascade_EmptyLatentImage:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_stable_cascade"
    FUNCTION = "execute"
    CATEGORY = "latent/stable_cascade"
    RETURN_TYPES = ("LATENT", "LATENT")
    RETURN_NAMES = ("stage_c", "stage_b")
    DESCRIPTION = "All-zero Stable Cascade latents: stage C (16 channels, 1/compression of the size), stage B (4, 1/4)."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "width": _size(1024, 256, 8),
                "height": _size(1024, 256, 8),
                "compression": ("INT", {"default": 42, "min": 4, "max": 128, "step": 1}),
                "batch_size": BATCH,
            }
        }

    def execute(self, width: int, height: int, compression: int, batch_size: int = 1):
        stage_c = torch.zeros(batch_size, 16, height // compression, width // compression)
        return ({"samples": stage_c}, {"samples": torch.zeros(batch_size, 4, height // 4, width // 4)})


def _with(conditioning: list, values: dict) -> list:
    """Each entry of `conditioning` with `values` added to (a copy of) its options."""
    return [[cond, {**opts, **values}] for cond, opts in conditioning]


class HunyuanRefinerLatent:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_hunyuan"
    FUNCTION = "execute"
    CATEGORY = "sd"  # ComfyUI 0.3.64 gives it none, so it lists under its default category
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    DESCRIPTION = (
        "Gives the Hunyuan Image 2.1 refiner the latent it refines (each conditioning's concat_latent_image, with "
        "noise_augmentation) and an all-zero 32-channel latent shaped by the latent's last three sizes."
    )

    @classmethod
    def INPUT_TYPES(cls):
        augmentation = ("FLOAT", {"default": 0.10, "min": 0.0, "max": 1.0, "step": 0.01})
        return {
            "required": {
                "positive": ("CONDITIONING", {}),
                "negative": ("CONDITIONING", {}),
                "latent": ("LATENT", {}),
                "noise_augmentation": augmentation,
            }
        }

    def execute(self, positive: list, negative: list, latent: dict, noise_augmentation: float):
        samples = latent["samples"]
        if samples.dim() < 3:
            raise ValueError(f"HunyuanRefinerLatent: the latent must have at least 3 dimensions, got {samples.dim()}")
        values = {"concat_latent_image": samples, "noise_augmentation": noise_augmentation}
        # ComfyUI shapes the output from the last three sizes, whatever the latent's rank ([B,C,H,W] gives C,H,W)
        empty = torch.zeros(samples.shape[0], 32, *samples.shape[-3:])
        return (_with(positive, values), _with(negative, values), {"samples": empty})


class StableCascade_StageB_Conditioning:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_stable_cascade"
    FUNCTION = "execute"
    CATEGORY = "conditioning/stable_cascade"
    RETURN_TYPES = ("CONDITIONING",)
    DESCRIPTION = "Gives stage B the stage C latent it refines (as each conditioning's stable_cascade_prior)."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"conditioning": ("CONDITIONING", {}), "stage_c": ("LATENT", {})}}

    def execute(self, conditioning: list, stage_c: dict):
        return (_with(conditioning, {"stable_cascade_prior": stage_c["samples"]}),)


class SD_4XUpscale_Conditioning:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_sdupscale"
    FUNCTION = "execute"
    CATEGORY = "conditioning/upscale_diffusion"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    DESCRIPTION = (
        "Conditions the SD x4 upscaler on the images (scaled to -1..1, at a quarter of the output size) and "
        "gives the empty latent of the output size scale_ratio times the images'."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": ("IMAGE", {}),
                "positive": ("CONDITIONING", {}),
                "negative": ("CONDITIONING", {}),
                "scale_ratio": ("FLOAT", {"default": 4.0, "min": 0.0, "max": 10.0, "step": 0.01}),
                "noise_augmentation": ("FLOAT", {"default": 0.0, "min": 0.0, "max": 1.0, "step": 0.001}),
            }
        }

    def execute(
        self, images: torch.Tensor, positive: list, negative: list, scale_ratio: float, noise_augmentation: float
    ):
        width = max(1, round(images.shape[-2] * scale_ratio))
        height = max(1, round(images.shape[-3] * scale_ratio))
        if width < 4 or height < 4:  # ComfyUI fails here with a division by zero
            raise ValueError(
                f"SD_4XUpscale_Conditioning: the output ({width}x{height}, scale_ratio {scale_ratio}) must be at least "
                "4 pixels on each side"
            )
        pixels = common_upscale(images.movedim(-1, 1) * 2.0 - 1.0, width // 4, height // 4, "bilinear", "center")
        values = {"concat_image": pixels, "noise_augmentation": noise_augmentation}
        latent = torch.zeros(images.shape[0], 4, height // 4, width // 4)
        return (_with(positive, values), _with(negative, values), {"samples": latent})


NODE_CLASS_MAPPINGS = {
    cls.__name__: cls
    for cls in (
        EmptyMochiLatentVideo,
        EmptyCosmosLatentVideo,
        EmptyHunyuanImageLatent,
        EmptyQwenImageLayeredLatentImage,
        HunyuanRefinerLatent,
        StableCascade_EmptyLatentImage,
        StableCascade_StageB_Conditioning,
        SD_4XUpscale_Conditioning,
    )
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {"EmptyQwenImageLayeredLatentImage": "Empty Qwen Image Layered Latent"}
