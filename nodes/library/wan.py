"""Wan video latents and image-to-video conditioning (ComfyUI's comfy_extras.nodes_wan and the Hunyuan video
latent that Wan 2.1's templates use): Empty HunyuanVideo Latent, WanImageToVideo, WanFirstLastFrameToVideo,
Wan22ImageToVideoLatent and the Fun models' WanFunControlToVideo, Wan22FunControlToVideo and WanFunInpaintToVideo.

Video latents are [B,C,1+(length-1)//4,H/8,W/8] (Wan 2.1 VAE, 16 channels) or [B,48,...,H/16,W/16] (Wan 2.2
VAE). The image-to-video nodes encode a whole clip (the given frames, grey 0.5 elsewhere) as one video with
the VAE and hand it to the model with a mask of the latent frames the images fix (concat_latent_image,
concat_mask); the model joins both to its input channels (nodes.models.wan)."""

from __future__ import annotations

import torch

from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.inputs import require_component
from nodes.ksampler import call_model_fn
from nodes.models.components import WAN21_LATENT, WAN22_LATENT
from nodes.upscale import common_upscale
from nodes.video_inputs import batch_input, video_inputs, video_length, video_size

WAN21_VAE_ARCH = "qwen_image"  # the Wan 2.1 VAE (also Qwen-Image's) detects under this family
WAN22_VAE_ARCH = "wan22_5b"


def latent_frames(length: int) -> int:
    return (length - 1) // 4 + 1


def fit_frames(images: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """IMAGE frames resized to width x height as ComfyUI does for these nodes (bilinear, centre crop)."""
    return common_upscale(images.movedim(-1, 1), width, height, "bilinear", "center").movedim(1, -1)


def grey_clip_from(frames: torch.Tensor, length: int) -> torch.Tensor:
    """A `length`-frame clip that opens with `frames` (at most `length` of them, already at the clip's size) and is
    grey 0.5 after, in their channels and dtype: what these nodes encode around their given frames."""
    clip = torch.full((length, *frames.shape[1:]), 0.5, dtype=frames.dtype)
    clip[: frames.shape[0]] = frames
    return clip


async def encode_video(vae, frames: torch.Tensor, arch: str = WAN21_VAE_ARCH) -> torch.Tensor:
    """IMAGE [T,H,W,3] -> the VAE's latent of the clip: [1,16,1+(T-1)//4,H/8,W/8] from the Wan 2.1 VAE,
    [1,48,...,H/16,W/16] from the Wan 2.2 VAE (`arch`, the one the node needs)."""
    vae = require_component(vae, "vae", "vae")
    if vae.arch != arch:
        name = (
            "Wan 2.1 VAE (wan_2.1_vae.safetensors)"
            if arch == WAN21_VAE_ARCH
            else "Wan 2.2 VAE (wan2.2_vae.safetensors)"
        )
        raise ValueError(f"vae: the {name} is needed here, got a {vae.arch} VAE")
    out = await call_model_fn("vae_encode", vae, "vae", {"pixels": frames[..., :3].contiguous()}, {"video": True})
    return out["latent"]


class EmptyHunyuanLatentVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_hunyuan"
    FUNCTION = "execute"
    CATEGORY = "latent/video"
    RETURN_TYPES = ("LATENT",)
    DESCRIPTION = "An all-zero 16-channel video latent (Wan 2.1 / HunyuanVideo): length frames give 1+(length-1)/4."

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
        return ({"samples": torch.zeros(batch_size, 16, latent_frames(length), height // 8, width // 8)},)


class WanImageToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_wan"
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    DESCRIPTION = "Conditions a Wan image-to-video model on a start image (and optionally its CLIP vision output)."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": video_inputs(),
            "optional": {"clip_vision_output": ("CLIP_VISION_OUTPUT", {}), "start_image": ("IMAGE", {})},
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
        latent = torch.zeros(batch_size, 16, latent_frames(length), height // 8, width // 8)
        extra = {}
        if start_image is not None:
            start = fit_frames(start_image[:length], width, height)
            image = await encode_video(vae, grey_clip_from(start, length))
            mask = torch.ones(1, 1, latent.shape[2], image.shape[-2], image.shape[-1])
            mask[:, :, : latent_frames(start.shape[0])] = 0.0
            extra = {"concat_latent_image": image, "concat_mask": mask}
        if clip_vision_output is not None:
            extra["clip_vision_output"] = clip_vision_output
        if extra:
            positive, negative = set_values(positive, extra), set_values(negative, extra)
        return positive, negative, {"samples": latent}


class WanFirstLastFrameToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_wan"
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    DESCRIPTION = "Conditions a Wan image-to-video model on a first and/or last frame."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": video_inputs(),
            "optional": {
                "clip_vision_start_image": ("CLIP_VISION_OUTPUT", {}),
                "clip_vision_end_image": ("CLIP_VISION_OUTPUT", {}),
                "start_image": ("IMAGE", {}),
                "end_image": ("IMAGE", {}),
            },
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
        end_image: torch.Tensor | None = None,
        clip_vision_start_image=None,
        clip_vision_end_image=None,
    ):
        positive, negative = require(positive, "positive"), require(negative, "negative")
        vae = require_component(vae, "vae", "vae")
        # the VAE's latent: the Wan 2.1 VAE's 16 channels at 1/8, or the Wan 2.2 VAE's 48 at 1/16 (Wan 2.2 Fun 5B InP)
        channels, scale, arch = (48, 16, WAN22_VAE_ARCH) if vae.arch == WAN22_VAE_ARCH else (16, 8, WAN21_VAE_ARCH)
        frames = latent_frames(length)
        latent = torch.zeros(batch_size, channels, frames, height // scale, width // scale)
        clip = torch.full((length, height, width, 3), 0.5)
        # one mask entry per pixel frame of the 4-frame groups; 0 where an image fixes the frame
        mask = torch.ones(1, 1, frames * 4, height // scale, width // scale)
        if start_image is not None:
            start = fit_frames(start_image[:length], width, height)
            clip[: start.shape[0]] = start[..., :3]
            mask[:, :, : start.shape[0] + 3] = 0.0  # the first latent frame holds one pixel frame, shown 4 times
        if end_image is not None:
            end = fit_frames(end_image[-length:], width, height)
            clip[-end.shape[0] :] = end[..., :3]
            mask[:, :, -end.shape[0] :] = 0.0
        image = await encode_video(vae, clip, arch)
        mask = mask.view(1, frames, 4, mask.shape[-2], mask.shape[-1]).transpose(1, 2)
        extra = {"concat_latent_image": image, "concat_mask": mask}
        vision = _join_vision(clip_vision_start_image, clip_vision_end_image)
        if vision is not None:
            extra["clip_vision_output"] = vision
        return set_values(positive, extra), set_values(negative, extra), {"samples": latent}


def _join_vision(start, end):
    """The start image's CLIP vision states followed by the end image's, as one output."""
    if start is None or end is None:
        return start if end is None else end
    from dataclasses import replace

    return replace(
        start,
        penultimate_hidden_states=torch.cat([start.penultimate_hidden_states, end.penultimate_hidden_states], dim=-2),
    )


class Wan22ImageToVideoLatent:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_wan"
    FUNCTION = "execute"
    CATEGORY = "conditioning/inpaint"
    RETURN_TYPES = ("LATENT",)
    DESCRIPTION = (
        "Wan 2.2 5B's 48-channel video latent (1/16 of the size); with a start image (Wan 2.2 VAE) its "
        "first frames are the image's latent and a noise mask keeps them."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "vae": ("VAE", {}),
                "width": video_size(1280, step=32),
                "height": video_size(704, step=32),
                "length": video_length(49),
                "batch_size": batch_input(),
            },
            "optional": {"start_image": ("IMAGE", {})},
        }

    async def execute(
        self, vae, width: int, height: int, length: int, batch_size: int, start_image: torch.Tensor | None = None
    ):
        latent = torch.zeros(1, 48, latent_frames(length), height // 16, width // 16)
        if start_image is None:  # ComfyUI gives one empty latent whatever the batch size
            return ({"samples": latent},)
        image = await encode_video(vae, fit_frames(start_image[:length], width, height), WAN22_VAE_ARCH)
        frames = image.shape[2]
        latent[:, :, :frames] = image
        mask = torch.ones(1, 1, latent.shape[2], latent.shape[-2], latent.shape[-1])
        mask[:, :, :frames] = 0.0
        # outside the image's frames the latent is the format's zero (its mean): empty once in model space
        latent = WAN22_LATENT.process_out(latent) * mask + latent * (1.0 - mask)
        return ({"samples": latent.repeat(batch_size, 1, 1, 1, 1), "noise_mask": mask.repeat(batch_size, 1, 1, 1, 1)},)


async def _fun_concat(
    vae,
    width: int,
    height: int,
    length: int,
    batch_size: int,
    channels: int,
    scale: int,
    start_image: torch.Tensor | None,
    control_video: torch.Tensor | None,
) -> torch.Tensor:
    """A Fun Control model's conditioning latent: the control video's latent in the first `channels` channels,
    the start image's in the next; the format's zero (its mean, raw) where no video gives frames."""
    fmt = WAN22_LATENT if channels == 48 else WAN21_LATENT
    arch = WAN22_VAE_ARCH if channels == 48 else WAN21_VAE_ARCH
    shape = (batch_size, channels, latent_frames(length), height // scale, width // scale)
    concat = fmt.process_out(torch.zeros(shape)).repeat(1, 2, 1, 1, 1)
    for offset, frames in ((channels, start_image), (0, control_video)):
        if frames is not None:
            encoded = await encode_video(vae, fit_frames(frames[:length], width, height)[..., :3], arch)
            n = min(encoded.shape[2], concat.shape[2])
            concat[:, offset : offset + channels, :n] = encoded[:, :, :n]
    return concat


class WanFunControlToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_wan"
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    DESCRIPTION = "Conditions a Wan 2.1 Fun Control model on a control video and optionally a start image."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": video_inputs(),
            "optional": {
                "clip_vision_output": ("CLIP_VISION_OUTPUT", {}),
                "start_image": ("IMAGE", {}),
                "control_video": ("IMAGE", {}),
            },
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
        control_video: torch.Tensor | None = None,
    ):
        positive, negative = require(positive, "positive"), require(negative, "negative")
        latent = torch.zeros(batch_size, 16, latent_frames(length), height // 8, width // 8)
        extra = {
            "concat_latent_image": await _fun_concat(
                vae, width, height, length, batch_size, 16, 8, start_image, control_video
            )
        }
        if clip_vision_output is not None:
            extra["clip_vision_output"] = clip_vision_output
        return set_values(positive, extra), set_values(negative, extra), {"samples": latent}


class Wan22FunControlToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_wan"
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    DESCRIPTION = (
        "Conditions a Wan 2.2 Fun Control model on a control video: control latent, mask and image "
        "latent joined to the noise."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": video_inputs(), "optional": {"ref_image": ("IMAGE", {}), "control_video": ("IMAGE", {})}}

    async def execute(
        self,
        positive,
        negative,
        vae,
        width: int,
        height: int,
        length: int,
        batch_size: int,
        ref_image: torch.Tensor | None = None,
        control_video: torch.Tensor | None = None,
    ):
        positive, negative = require(positive, "positive"), require(negative, "negative")
        vae = require_component(vae, "vae", "vae")
        channels, scale = (48, 16) if vae.arch == WAN22_VAE_ARCH else (16, 8)
        if ref_image is not None:  # the model's ref_conv reads it: appended to each entry's reference latents
            arch = WAN22_VAE_ARCH if channels == 48 else WAN21_VAE_ARCH
            ref = await encode_video(vae, fit_frames(ref_image[:1], width, height)[..., :3], arch)
            positive, negative = (
                [[c, {**o, "reference_latents": [*(o.get("reference_latents") or []), ref]}] for c, o in side]
                for side in (positive, negative)
            )
        frames = latent_frames(length)
        latent = torch.zeros(batch_size, channels, frames, height // scale, width // scale)
        concat = await _fun_concat(vae, width, height, length, batch_size, channels, scale, None, control_video)
        # no start image input: every frame is generated (ComfyUI's mask of ones, four per latent frame)
        mask = torch.ones(1, 4, frames, height // scale, width // scale)
        extra = {"concat_latent_image": concat, "concat_mask": mask, "concat_mask_index": channels}
        return set_values(positive, extra), set_values(negative, extra), {"samples": latent}


class WanFunInpaintToVideo(WanFirstLastFrameToVideo):
    DESCRIPTION = "Conditions a Wan Fun InP model on a start and/or end image (WanFirstLastFrameToVideo's recipe)."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": video_inputs(),
            "optional": {
                "clip_vision_output": ("CLIP_VISION_OUTPUT", {}),
                "start_image": ("IMAGE", {}),
                "end_image": ("IMAGE", {}),
            },
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
        end_image: torch.Tensor | None = None,
        clip_vision_output=None,
    ):
        return await super().execute(
            positive,
            negative,
            vae,
            width,
            height,
            length,
            batch_size,
            start_image=start_image,
            end_image=end_image,
            clip_vision_start_image=clip_vision_output,
        )


NODE_CLASS_MAPPINGS = {
    "EmptyHunyuanLatentVideo": EmptyHunyuanLatentVideo,
    "WanImageToVideo": WanImageToVideo,
    "WanFirstLastFrameToVideo": WanFirstLastFrameToVideo,
    "Wan22ImageToVideoLatent": Wan22ImageToVideoLatent,
    "WanFunControlToVideo": WanFunControlToVideo,
    "Wan22FunControlToVideo": Wan22FunControlToVideo,
    "WanFunInpaintToVideo": WanFunInpaintToVideo,
}
NODE_DISPLAY_NAME_MAPPINGS = {"EmptyHunyuanLatentVideo": "Empty HunyuanVideo 1.0 Latent"}
