"""Wan Phantom (subject-to-video): WanPhantomSubjectToVideo (ComfyUI's comfy_extras.nodes_wan).

Each subject image is encoded alone by the Wan 2.1 VAE (one latent frame each) and the frames are appended after
the video's latent frames along time (`time_dim_concat`, read by nodes.models.wan): the model attends to them as
more frames and its output is cut back to the video's. Three conditionings come out, in ComfyUI's order: the
positive with the images, the negative with the images ("negative_text"), and the negative with the latent
format's zero in their place ("negative_img_text")."""

from __future__ import annotations

import torch

from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.library.wan import encode_video, fit_frames, latent_frames
from nodes.models.components import WAN21_LATENT
from nodes.video_inputs import video_inputs


class WanPhantomSubjectToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_wan"
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative_text", "negative_img_text", "latent")
    DESCRIPTION = (
        "Conditions a Wan Phantom model on subject images: each image's latent frame follows the video's frames."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": video_inputs(), "optional": {"images": ("IMAGE", {})}}

    async def execute(
        self,
        positive,
        negative,
        vae,
        width: int,
        height: int,
        length: int,
        batch_size: int,
        images: torch.Tensor | None = None,
    ):
        positive, negative = require(positive, "positive"), require(negative, "negative")
        latent = torch.zeros(batch_size, 16, latent_frames(length), height // 8, width // 8)
        negative_text = negative
        if images is not None:
            frames = fit_frames(images[:length], width, height)
            # one encode per image: each is its own first frame, not a frame of a clip
            subjects = torch.cat([await encode_video(vae, frame[None, ..., :3]) for frame in frames], dim=2)
            positive = set_values(positive, {"time_dim_concat": subjects})
            negative_text = set_values(negative, {"time_dim_concat": subjects})
            negative = set_values(negative, {"time_dim_concat": WAN21_LATENT.process_out(torch.zeros_like(subjects))})
        return positive, negative_text, negative, {"samples": latent}


NODE_CLASS_MAPPINGS = {"WanPhantomSubjectToVideo": WanPhantomSubjectToVideo}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
