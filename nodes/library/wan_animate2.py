"""Wan Animate 2's nodes (ComfyUI's comfy_extras.nodes_wan, newer than every ComfyUI that runs here; written from
its definition): WanAnimate2ToVideo and WanAnimate2Cache.

WanAnimate2ToVideo encodes the reference image as one latent frame in front of the video (trim_latent drops it
after sampling), the clip (continue_motion's last frame, grey 0.5 elsewhere) after it, with a mask that fixes
the reference frame and the continued one; the pose video (from video_frame_offset, its last frame held to the
length) is encoded as the pose branch's latents. The pose values ride both conditionings (upstream runs the
pose branch outside CFG) and, for a pose window, only a cond limited to that window, with complement conds
without them covering the rest of sampling (the network then runs without its pose branch,
nodes.models.wan_animate2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes import MAX_RESOLUTION
from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.inputs import require_model
from nodes.library.wan import encode_video, grey_clip_from, latent_frames
from nodes.modelfns.model_options import with_function
from nodes.modelfns.network_patches import DIFFUSION_MODEL
from nodes.models.wan_animate2 import POSE_CACHE_DTYPES, reading_pose_cache
from nodes.upscale import common_upscale
from nodes.video_inputs import video_inputs

CATEGORY = "model/conditioning/wan/animate"
CONTINUE_MOTION_FRAMES = 1  # upstream's: the previous segment's last frame anchors the next one


def _fit(images: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """IMAGE frames resized as this node does (area, centre crop)."""
    return common_upscale(images.movedim(-1, 1), width, height, "area", "center").movedim(1, -1)


def _strength(default: float) -> tuple:
    return ("FLOAT", {"default": default, "min": 0.0, "max": 10.0, "step": 0.01})


def _percent(default: float) -> tuple:
    return ("FLOAT", {"default": default, "min": 0.0, "max": 1.0, "step": 0.01})


class WanAnimate2ToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_wan"
    FUNCTION = "execute"
    CATEGORY = CATEGORY
    EXPERIMENTAL = True
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT", "INT", "INT", "INT")
    RETURN_NAMES = ("positive", "negative", "latent", "trim_latent", "trim_image", "video_frame_offset")
    DESCRIPTION = (
        "Animate a character in a reference image using a video, effectively replicating the facial animation, "
        "body motion and hands gesture from the video."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                **video_inputs(),
                "video_frame_offset": ("INT", {"default": 0, "min": 0, "max": MAX_RESOLUTION, "step": 1}),
                "pose_strength": _strength(1.0),
                "pose_start_percent": _percent(0.0),
                "pose_end_percent": _percent(1.0),
                "reference_image_strength": _strength(1.0),
            },
            "optional": {
                "reference_image": ("IMAGE", {}),
                "pose_video": ("IMAGE", {}),
                "clip_vision_output": ("CLIP_VISION_OUTPUT", {}),
                "positive_pose": ("CONDITIONING", {}),
                "clip_vision_output_pose": ("CLIP_VISION_OUTPUT", {}),
                "continue_motion": ("IMAGE", {}),
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
        video_frame_offset: int,
        reference_image: torch.Tensor | None = None,
        pose_video: torch.Tensor | None = None,
        clip_vision_output=None,
        positive_pose=None,
        clip_vision_output_pose=None,
        continue_motion: torch.Tensor | None = None,
        pose_strength: float = 1.0,
        pose_start_percent: float = 0.0,
        pose_end_percent: float = 1.0,
        reference_image_strength: float = 1.0,
    ):
        positive, negative = require(positive, "positive"), require(negative, "negative")
        if pose_start_percent > pose_end_percent:
            raise ValueError(
                f"pose_start_percent ({pose_start_percent}) must not be greater than pose_end_percent "
                f"({pose_end_percent})."
            )
        frames = latent_frames(length)
        if reference_image is None:
            reference_image = torch.zeros(1, height, width, 3)
        ref_latent = await encode_video(vae, _fit(reference_image[:1], width, height))
        trim_latent = ref_latent.shape[2]

        motion_latents = 0
        clip = torch.full((length, height, width, 3), 0.5)
        if continue_motion is not None:
            continue_motion = continue_motion[-CONTINUE_MOTION_FRAMES:]
            video_frame_offset = max(0, video_frame_offset - continue_motion.shape[0])
            continue_motion = _fit(continue_motion[-length:], width, height)
            clip = grey_clip_from(continue_motion, length)
            motion_latents = latent_frames(continue_motion.shape[0])
        concat = torch.cat([ref_latent, await encode_video(vae, clip)], dim=2)
        # one channel, 0 where a latent frame is known; the model inverts it and repeats it to its 4 mask channels
        mask = torch.ones(1, 1, frames + trim_latent, height // 8, width // 8, dtype=concat.dtype)
        mask[:, :, : trim_latent + motion_latents] = 0.0
        values: dict = {"concat_latent_image": concat, "concat_mask": mask}
        if clip_vision_output is not None:
            values["clip_vision_output"] = clip_vision_output
        if reference_image_strength != 1.0:  # every step: the reference frame is part of the latent throughout
            values["reference_strength"] = reference_image_strength
        positive, negative = set_values(positive, values), set_values(negative, values)

        pose: dict = {}
        if pose_video is not None:
            if pose_video.shape[0] <= video_frame_offset:
                raise ValueError(
                    f"pose_video has {pose_video.shape[0]} frames but video_frame_offset is {video_frame_offset} "
                    "-- nothing left to read."
                )
            pose_video = _fit(pose_video[video_frame_offset:][:length], width, height)
            if pose_video.shape[0] < length:  # hold the last frame, as upstream pads its clips
                pose_video = torch.cat([pose_video, pose_video[-1:].expand(length - pose_video.shape[0], -1, -1, -1)])
            pose["pose_video_latent"] = await encode_video(vae, pose_video)
        pose_clip = clip_vision_output_pose if clip_vision_output_pose is not None else clip_vision_output
        if pose_clip is not None:
            pose["clip_vision_output_pose"] = pose_clip
        pose_cond = require(positive_pose, "positive_pose") if positive_pose is not None else positive
        if pose_cond:
            pose["cross_attn_pose"] = pose_cond[0][0]
        if pose_strength != 1.0:
            pose["pose_strength"] = pose_strength
        if pose_start_percent > 0.0 or pose_end_percent < 1.0:
            positive, negative = (
                _windowed(c, pose, pose_start_percent, pose_end_percent) for c in (positive, negative)
            )
        else:
            positive, negative = set_values(positive, pose), set_values(negative, pose)

        latent = torch.zeros(batch_size, 16, frames + trim_latent, height // 8, width // 8)
        trim_image = max(0, motion_latents * 4 - 3)
        return positive, negative, {"samples": latent}, trim_latent, trim_image, video_frame_offset + length


def _windowed(cond: list, pose: dict, start: float, end: float) -> list:
    """The pose values on a cond limited to [start, end] of sampling, complement conds without them elsewhere."""
    parts = set_values(cond, {**pose, "start_percent": start, "end_percent": end})
    if start > 0.0:
        parts = parts + set_values(cond, {"start_percent": 0.0, "end_percent": start})
    if end < 1.0:
        parts = parts + set_values(cond, {"start_percent": end, "end_percent": 1.0})
    return parts


# The sampler state key that says this run's quantized pose cache is filled (its first pass with the pose ran).
POSE_CACHE_FILLED = "animate2.pose_cache_filled"


@dataclass(frozen=True)
class PoseCacheWrapper:
    """Each forward pass of a sampling run through WanAnimate2Cache's quantized cache: the first pass that runs the
    pose branch fills it (full precision), every later one reads the quantized block inputs
    (nodes.models.wan_animate2). Whether it is filled travels with the sampler state from step to step."""

    dtype: str

    def __call__(
        self,
        forward: Callable[[torch.Tensor], torch.Tensor],
        x: torch.Tensor,
        sigma: torch.Tensor,
        keys: list[str],
        state: dict[str, torch.Tensor],
        evaluation: dict[str, Any],
    ) -> torch.Tensor:
        with reading_pose_cache(self.dtype if POSE_CACHE_FILLED in state else None) as cache:
            out = forward(x)
        if cache.used:
            state[POSE_CACHE_FILLED] = torch.ones(())
        return out


class WanAnimate2Cache:
    """Upstream keeps the pose branch's block inputs between the forward passes of one sampling run so that branch
    runs once. At dtype default that changes no number (the branch reads neither the step's latent nor its
    timestep): each denoising step here is a stateless ModelFn that may run on any executor, so the branch is
    recomputed and the MODEL passes through unchanged. At int8 / int4 the stored inputs are quantized, which does
    change the numbers from the second pass on: the MODEL gets a diffusion-model wrapper that runs those passes
    with the keys and values of the quantized inputs (PoseCacheWrapper). `device` only says where upstream keeps
    the cache."""

    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_wan"
    FUNCTION = "execute"
    CATEGORY = CATEGORY
    EXPERIMENTAL = True
    RETURN_TYPES = ("MODEL",)
    DESCRIPTION = "Caches the pose-video's per-block activations (default: same numbers; int8/int4 quantized)."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "device": ("COMBO", {"default": "cpu", "multiselect": False, "options": ["cpu", "gpu"]}),
                "dtype": (
                    "COMBO",
                    {"default": "default", "multiselect": False, "options": ["default", *POSE_CACHE_DTYPES]},
                ),
            }
        }

    def execute(self, model: ModelRef, device: str, dtype: str = "default"):
        model = require_model(model)
        if dtype == "default":
            return (model,)
        if dtype not in POSE_CACHE_DTYPES:
            raise ValueError(f"WanAnimate2Cache dtype: {dtype!r} is not one of default, {', '.join(POSE_CACHE_DTYPES)}")
        return (with_function(model, DIFFUSION_MODEL, PoseCacheWrapper(dtype)),)


NODE_CLASS_MAPPINGS = {"WanAnimate2ToVideo": WanAnimate2ToVideo, "WanAnimate2Cache": WanAnimate2Cache}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
