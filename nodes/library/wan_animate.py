"""Wan 2.2 Animate: WanAnimateToVideo (ComfyUI 0.3.64's comfy_extras.nodes_wan, experimental there).

The reference image is encoded as latent frames in front of the video (trim_latent of them, which the sampled
latent drops afterwards); the video's clip is grey 0.5 with continue_motion's last frames at its start and
background_video's frames after those, and its mask fixes the reference and the continued frames (character_mask,
at the latent's cells, decides the rest). The pose video is encoded as `pose_video_latent`, the face video is
kept as 512x512 pixels in [-1,1] (`face_video_pixels`; the negative's are all -1): what ComfyUI's Wan 2.2 Animate
model reads. All inputs are read from video_frame_offset on, so chained nodes continue a long video.

ComfyUI's other Wan models read only the image-to-video concat (and CLIP vision states) of this conditioning;
so do ours. The Wan 2.2 Animate network itself (its pose embedding, face encoder and face adapter) is not
implemented here yet: its files are refused by name (nodes.models.wan)."""

from __future__ import annotations

import torch

from nodes import MAX_RESOLUTION
from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.library.wan import encode_video, latent_frames
from nodes.upscale import common_upscale
from nodes.video_inputs import video_inputs

FACE_SIZE = 512  # the face encoder's input


def _fit(frames: torch.Tensor, width: int, height: int, method: str = "area") -> torch.Tensor:
    return common_upscale(frames.movedim(-1, 1), width, height, method, "center").movedim(1, -1)


def _from_offset(frames: torch.Tensor | None, offset: int) -> torch.Tensor | None:
    """The frames from `offset` on; None where the input is absent or has no frame there."""
    return None if frames is None or frames.shape[0] <= offset else frames[offset:]


def _character_mask(mask: torch.Tensor, offset: int, length: int, width: int, height: int) -> torch.Tensor | None:
    """MASK [T,H,W] (or one frame for all) -> [1,1,T,height,width] at the latent's cells, from the offset on."""
    if mask.shape[0] <= offset and mask.shape[0] != 1:
        return None
    mask = mask.repeat((length,) + (1,) * (mask.dim() - 1)) if mask.shape[0] == 1 else mask[offset:]
    if mask.dim() == 3:
        mask = mask.unsqueeze(1).movedim(0, 1)
    if mask.dim() == 4:
        mask = mask.unsqueeze(1)
    return common_upscale(mask[:, :, :length], width, height, "nearest-exact", "center")


class WanAnimateToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_wan"
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    EXPERIMENTAL = True
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT", "INT", "INT", "INT")
    RETURN_NAMES = ("positive", "negative", "latent", "trim_latent", "trim_image", "video_frame_offset")
    DESCRIPTION = (
        "Conditions a Wan 2.2 Animate model on a reference image, pose and face videos, a background and a "
        "character mask; chained by video_frame_offset and continue_motion for long videos."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                **video_inputs(length=77),
                "continue_motion_max_frames": ("INT", {"default": 5, "min": 1, "max": MAX_RESOLUTION, "step": 4}),
                "video_frame_offset": (
                    "INT",
                    {
                        "default": 0,
                        "min": 0,
                        "max": MAX_RESOLUTION,
                        "step": 1,
                        "tooltip": "Frames to skip in every input video: the previous node's video_frame_offset "
                        "output, to continue a long video chunk by chunk.",
                    },
                ),
            },
            "optional": {
                "clip_vision_output": ("CLIP_VISION_OUTPUT", {}),
                "reference_image": ("IMAGE", {}),
                "face_video": ("IMAGE", {}),
                "pose_video": ("IMAGE", {}),
                "background_video": ("IMAGE", {}),
                "character_mask": ("MASK", {}),
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
        continue_motion_max_frames: int,
        video_frame_offset: int,
        reference_image: torch.Tensor | None = None,
        clip_vision_output=None,
        face_video: torch.Tensor | None = None,
        pose_video: torch.Tensor | None = None,
        continue_motion: torch.Tensor | None = None,
        background_video: torch.Tensor | None = None,
        character_mask: torch.Tensor | None = None,
    ):
        positive, negative = require(positive, "positive"), require(negative, "negative")
        frames = latent_frames(length)
        if reference_image is None:
            reference_image = torch.zeros(1, height, width, 3)
        reference = await encode_video(vae, _fit(reference_image[:length], width, height)[..., :3])
        trim_latent = reference.shape[2]
        cells = reference.shape[-2:]
        motion_frames = 0  # latent frames continue_motion fixes
        if continue_motion is None:
            clip = torch.full((length, height, width, 3), 0.5)
        else:
            continue_motion = continue_motion[-continue_motion_max_frames:]
            video_frame_offset = max(0, video_frame_offset - continue_motion.shape[0])
            continue_motion = _fit(continue_motion[-length:], width, height)
            clip = torch.full((length, height, width, continue_motion.shape[-1]), 0.5, dtype=continue_motion.dtype)
            clip[: continue_motion.shape[0]] = continue_motion
            motion_frames = latent_frames(continue_motion.shape[0])
        extra = {} if clip_vision_output is None else {"clip_vision_output": clip_vision_output}
        positive, negative = set_values(positive, extra), set_values(negative, extra)

        pose_video = _from_offset(pose_video, video_frame_offset)
        if pose_video is not None:
            pose_video = _fit(pose_video[:length], width, height)
            if pose_video.shape[0] < length:  # the last pose held to the length
                pose_video = torch.cat([pose_video, pose_video[-1:].expand(length - pose_video.shape[0], -1, -1, -1)])
            pose = {"pose_video_latent": await encode_video(vae, pose_video[..., :3])}
            positive, negative = set_values(positive, pose), set_values(negative, pose)

        face_video = _from_offset(face_video, video_frame_offset)
        if face_video is not None:
            face = common_upscale(face_video[:length].movedim(-1, 1), FACE_SIZE, FACE_SIZE, "area", "center")
            face = (face * 2.0 - 1.0).movedim(0, 1).unsqueeze(0)  # [1,C,T,512,512]
            positive = set_values(positive, {"face_video_pixels": face})
            negative = set_values(negative, {"face_video_pixels": face * 0.0 - 1.0})

        continued = max(0, motion_frames * 4 - 3)  # pixel frames continue_motion fixes
        background_video = _from_offset(background_video, video_frame_offset)
        if background_video is not None:
            background_video = _fit(background_video[:length], width, height)
            if background_video.shape[0] > continued:
                clip[continued : background_video.shape[0]] = background_video[continued:]

        # one mask entry per pixel frame of the 4-frame groups: 1 generated, 0 fixed
        mask = torch.ones(1, 1, frames * 4, *cells)
        mask[:, :, : motion_frames * 4] = 0.0
        if character_mask is not None:
            character = _character_mask(character_mask, video_frame_offset, length, cells[1], cells[0])
            if character is not None and character.shape[2] > continued:
                mask[:, :, continued : character.shape[2]] = character[:, :, continued:]
        mask = mask.view(1, frames, 4, *cells).transpose(1, 2)
        concat = torch.cat([reference, await encode_video(vae, clip[..., :3])], dim=2)
        extra = {
            "concat_latent_image": concat,
            "concat_mask": torch.cat([torch.zeros(1, 4, trim_latent, *cells), mask], dim=2),
        }
        positive, negative = set_values(positive, extra), set_values(negative, extra)
        latent = torch.zeros(batch_size, 16, frames + trim_latent, height // 8, width // 8)
        return positive, negative, {"samples": latent}, trim_latent, continued, video_frame_offset + length


NODE_CLASS_MAPPINGS = {"WanAnimateToVideo": WanAnimateToVideo}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
