"""HunyuanVideo 1.5's latent and conditioning nodes (ComfyUI 0.10.0's comfy_extras.nodes_hunyuan):
EmptyHunyuanVideo15Latent, HunyuanVideo15ImageToVideo, and the 1080p stage's HunyuanVideo15LatentUpscaleWithModel
(the latent resized, then refined by the 1080p latent upsampler) and HunyuanVideo15SuperResolution (the conditioning
of the super-resolution model, which is not supported yet).

Latents are [B,32,1+(length-1)//4,H/16,W/16]. The image-to-video node encodes the start frames alone (resized as
ComfyUI resizes them, bilinear with a centre crop) and hands the model a full-length image latent (zeros after the
encoded frames) with a mask that is 0 on the latent frames the images fix; the model joins both to its input
channels (nodes.models.hunyuan_video15). A CLIP vision output joins the conditioning for its image tokens."""

from __future__ import annotations

import torch

from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.inputs import require_component, require_ref
from nodes.ksampler import call_model_fn
from nodes.library.wan import fit_frames, latent_frames
from nodes.upscale import common_upscale
from nodes.video_inputs import batch_input, video_inputs, video_length, video_size

LATENT_CHANNELS = 32
DOWNSCALE = 16
VAE_ARCH = "hunyuan_video15"
UPSCALE_METHODS = ("nearest-exact", "bilinear", "area", "bicubic", "bislerp")


def empty_latent(batch_size: int, length: int, width: int, height: int) -> torch.Tensor:
    return torch.zeros(batch_size, LATENT_CHANNELS, latent_frames(length), height // DOWNSCALE, width // DOWNSCALE)


class EmptyHunyuanVideo15Latent:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_hunyuan"
    FUNCTION = "execute"
    CATEGORY = "latent/video"
    RETURN_TYPES = ("LATENT",)
    DESCRIPTION = (
        "An all-zero HunyuanVideo 1.5 latent: 32 channels at 1/16 of the size, length frames give 1+(length-1)/4."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "width": video_size(848),
                "height": video_size(480),
                "length": video_length(25),
                "batch_size": batch_input(),
            }
        }

    def execute(self, width: int, height: int, length: int, batch_size: int = 1):
        return ({"samples": empty_latent(batch_size, length, width, height)},)


class HunyuanVideo15ImageToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_hunyuan"
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    DESCRIPTION = "Conditions a HunyuanVideo 1.5 model on start frames (and optionally their CLIP vision output)."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                **video_inputs(848, 480, 33),
            },
            "optional": {"start_image": ("IMAGE", {}), "clip_vision_output": ("CLIP_VISION_OUTPUT", {})},
        }

    async def execute(
        self,
        positive,
        negative,
        vae,
        width: int,
        height: int,
        length: int,
        batch_size: int,
        start_image: torch.Tensor | None = None,
        clip_vision_output=None,
    ):
        positive, negative = require(positive, "positive"), require(negative, "negative")
        latent = empty_latent(batch_size, length, width, height)
        extra = {}
        if start_image is not None:
            start = fit_frames(start_image[:length], width, height)
            encoded = await encode_start(vae, start[..., :3])
            image = torch.zeros(latent.shape[0], LATENT_CHANNELS, *latent.shape[2:])
            image[:, :, : encoded.shape[2]] = encoded
            mask = torch.ones(1, 1, latent.shape[2], latent.shape[-2], latent.shape[-1])
            mask[:, :, : latent_frames(start.shape[0])] = 0.0
            extra = {"concat_latent_image": image, "concat_mask": mask}
        if clip_vision_output is not None:
            extra["clip_vision_output"] = clip_vision_output
        if extra:
            positive, negative = set_values(positive, extra), set_values(negative, extra)
        return positive, negative, {"samples": latent}


class HunyuanVideo15SuperResolution:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_hunyuan"
    FUNCTION = "execute"
    CATEGORY = "sd"  # ComfyUI's schema names none: its default
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    DESCRIPTION = (
        "Conditions HunyuanVideo 1.5's super-resolution model on a low-resolution latent (and optionally the start "
        "frames, encoded at 16x its size, and their CLIP vision output); the latent passes through."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "positive": ("CONDITIONING", {}),
                "negative": ("CONDITIONING", {}),
                "latent": ("LATENT", {}),
                "noise_augmentation": ("FLOAT", {"default": 0.7, "min": 0.0, "max": 1.0, "step": 0.01}),
            },
            "optional": {
                "vae": ("VAE", {}),
                "start_image": ("IMAGE", {}),
                "clip_vision_output": ("CLIP_VISION_OUTPUT", {}),
            },
        }

    async def execute(
        self,
        positive,
        negative,
        latent: dict,
        noise_augmentation: float,
        vae=None,
        start_image: torch.Tensor | None = None,
        clip_vision_output=None,
    ):
        positive, negative = require(positive, "positive"), require(negative, "negative")
        low = latent["samples"]
        c = low.shape[1]
        # ComfyUI's layout: [start latent (c), start flag (1), low-resolution latent (c), ones (1)]
        cond = torch.zeros(low.shape[0], 2 * c + 2, *low.shape[2:])
        cond[:, c + 1 : 2 * c + 1] = low
        cond[:, 2 * c + 1] = 1
        if start_image is not None:
            if vae is None:
                raise ValueError("vae: HunyuanVideo15SuperResolution needs the VAE to encode start_image")
            start = fit_frames(start_image, low.shape[-1] * DOWNSCALE, low.shape[-2] * DOWNSCALE)
            encoded = await encode_start(vae, start[..., :3])
            cond[:, :c, : encoded.shape[2]] = encoded
            cond[:, c + 1, 0] = 1  # as ComfyUI sets it: the low-resolution latent's first channel, first frame
        extra = {"concat_latent_image": cond, "noise_augmentation": noise_augmentation}
        if clip_vision_output is not None:
            extra["clip_vision_output"] = clip_vision_output
        return set_values(positive, extra), set_values(negative, extra), latent


class HunyuanVideo15LatentUpscaleWithModel:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_hunyuan"
    FUNCTION = "execute"
    CATEGORY = "latent"
    RETURN_TYPES = ("LATENT",)
    DESCRIPTION = "Resizes a HunyuanVideo 1.5 latent to width x height / 16 and refines it with the latent upsampler."

    @classmethod
    def INPUT_TYPES(cls):
        size = {"min": 0, "max": 16384, "step": 8}
        return {
            "required": {
                "model": ("LATENT_UPSCALE_MODEL", {}),
                "samples": ("LATENT", {}),
                "upscale_method": (
                    "COMBO",
                    {"default": "bilinear", "multiselect": False, "options": list(UPSCALE_METHODS)},
                ),
                "width": ("INT", {"default": 1280, **size}),
                "height": ("INT", {"default": 720, **size}),
                "crop": ("COMBO", {"multiselect": False, "options": ["disabled", "center"]}),
            }
        }

    async def execute(self, model, samples: dict, upscale_method: str, width: int, height: int, crop: str):
        ref = require_ref(model, "latent_upscale_model", "model", "LATENT_UPSCALE_MODEL")
        if ref.arch != "hunyuan_video15_upsampler":
            raise ValueError(f"model: HunyuanVideo 1.5's latent upsampler is needed here, got a {ref.arch} model")
        if width == 0 and height == 0:
            return (samples,)
        latent = samples["samples"]
        # ComfyUI's sizes: a zero side follows the latent's aspect; each side at least 64 pixels
        if width == 0:
            height = max(64, height)
            width = max(64, round(latent.shape[-1] * height / latent.shape[-2]))
        elif height == 0:
            width = max(64, width)
            height = max(64, round(latent.shape[-2] * width / latent.shape[-1]))
        else:
            width, height = max(64, width), max(64, height)
        resized = common_upscale(latent, width // DOWNSCALE, height // DOWNSCALE, upscale_method, crop)
        out = await call_model_fn("hunyuan_video15_latent_upsample", ref, "model", {"latent": resized.contiguous()}, {})
        return ({"samples": out["latent"].float()},)


async def encode_start(vae, frames: torch.Tensor) -> torch.Tensor:
    """IMAGE [T,H,W,3] -> the HunyuanVideo 1.5 VAE's latent of them as one clip, [1,32,1+(T-1)//4,H/16,W/16]."""
    vae = require_component(vae, "vae", "vae")
    if vae.arch != VAE_ARCH:
        raise ValueError(
            f"vae: the HunyuanVideo 1.5 VAE (hunyuanvideo15_vae_fp16.safetensors) is needed here, got a {vae.arch} VAE"
        )
    out = await call_model_fn("vae_encode", vae, "vae", {"pixels": frames.contiguous()}, {"video": True})
    return out["latent"]


NODE_CLASS_MAPPINGS = {
    "EmptyHunyuanVideo15Latent": EmptyHunyuanVideo15Latent,
    "HunyuanVideo15ImageToVideo": HunyuanVideo15ImageToVideo,
    "HunyuanVideo15SuperResolution": HunyuanVideo15SuperResolution,
    "HunyuanVideo15LatentUpscaleWithModel": HunyuanVideo15LatentUpscaleWithModel,
}
NODE_DISPLAY_NAME_MAPPINGS = {
    "EmptyHunyuanVideo15Latent": "Empty HunyuanVideo 1.5 Latent",
    "HunyuanVideo15LatentUpscaleWithModel": "Hunyuan Video 15 Latent Upscale With Model",
}
