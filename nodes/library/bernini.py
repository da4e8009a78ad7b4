"""BerniniConditioning (ComfyUI's comfy_extras.nodes_bernini, newer than every ComfyUI that runs here; written from
its definition): in-context conditioning for Bernini-R, a Wan 2.2 text-to-video A14B pair of experts.

The task follows from what is linked: nothing (text to video), a source video (video to video), a source video and
reference images (reference-guided editing), reference images alone (reference to video), a source video and a
reference video (putting the reference's content into the source). Each of them is encoded with the Wan 2.1 VAE on
its own and put on both conditionings as `context_latents`, in the order source video, reference video, reference
images (the network numbers the streams 1, 2, ... in that order; nodes.models.wan_bernini). The source video is
resized to the output size (area, centre crop) and cut to `length` frames; the reference video and every reference
image keep their own aspect, their long edge at most ref_max_size and both sides on 16-pixel steps; an image batch in
one slot gives one stream per image.
"""

from __future__ import annotations

import torch

from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.dynamic_inputs import DynamicSection, autogrow_prefix, group
from nodes.library.wan import encode_video
from nodes.upscale import common_upscale
from nodes.video_inputs import video_inputs

MAX_REFERENCES = 8
REFERENCE_IMAGES = autogrow_prefix(
    "reference_image",
    ("IMAGE", {"tooltip": "A reference image the model sees as extra tokens (reference to video, guided editing)."}),
    prefix="reference_image_",
    minimum=0,
    maximum=MAX_REFERENCES,
)
STRIDE = 16
MAX_SIZE = 8192  # the node's own bound on sizes and frames (not MAX_RESOLUTION)


def long_edge_resize(images: torch.Tensor, max_size: int, stride: int = STRIDE) -> torch.Tensor:
    """Images [B, H, W, C] scaled (never up) so the long edge is at most max_size, each side then rounded to a
    multiple of `stride` (at least one), area-resampled without cropping; RGB only."""
    h, w = images.shape[1], images.shape[2]
    scale = min(max_size / max(h, w), 1.0)
    height = max(stride, round(h * scale / stride) * stride)
    width = max(stride, round(w * scale / stride) * stride)
    return common_upscale(images[..., :3].movedim(-1, 1), width, height, "area", "disabled").movedim(1, -1)


def _size(default: int) -> tuple:
    return ("INT", {"default": default, "min": 16, "max": MAX_SIZE, "step": 16})


class BerniniConditioning:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_bernini"
    FUNCTION = "execute"
    CATEGORY = "model/conditioning/bernini"
    DESCRIPTION = (
        "In-context conditioning for Bernini (Wan 2.2 A14B): encodes a source video, a reference video and "
        "reference images with the VAE and attaches them to both conditionings. Which of them are linked picks the "
        "task: text to video, video to video, reference-guided editing, reference to video, or inserting a "
        "reference video into the source."
    )
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")

    @classmethod
    def INPUT_TYPES(cls):
        required = video_inputs()
        required["width"] = _size(832)
        required["height"] = _size(480)
        required["length"] = ("INT", {"default": 81, "min": 1, "max": MAX_SIZE, "step": 4})
        return {
            "required": required,
            "optional": DynamicSection(
                {
                    "source_video": (
                        "IMAGE",
                        {"tooltip": "The video to edit or restyle; resized to width x height, cut to length frames."},
                    ),
                    "reference_video": (
                        "IMAGE",
                        {"tooltip": "A video whose content is put into the source video; keeps its own aspect."},
                    ),
                    "reference_images": REFERENCE_IMAGES,
                    "ref_max_size": (
                        "INT",
                        {
                            "default": 848,
                            "min": 16,
                            "max": MAX_SIZE,
                            "step": 16,
                            "tooltip": "The longest edge the reference video and images are scaled down to (aspect "
                            "kept, sides on 16-pixel steps).",
                        },
                    ),
                }
            ),
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
        source_video: torch.Tensor | None = None,
        reference_video: torch.Tensor | None = None,
        ref_max_size: int = 848,
        **kwargs,
    ):
        positive = require(positive, "positive")
        negative = require(negative, "negative")
        latent = torch.zeros(batch_size, 16, (length - 1) // 4 + 1, height // 8, width // 8)
        streams = []
        if source_video is not None:
            frames = common_upscale(source_video[:length, ..., :3].movedim(-1, 1), width, height, "area", "center")
            streams.append(await encode_video(vae, frames.movedim(1, -1)))
        if reference_video is not None:
            streams.append(await encode_video(vae, long_edge_resize(reference_video[:length], ref_max_size)))
        references = group(kwargs, "reference_images", REFERENCE_IMAGES)
        for name in sorted(references):  # by slot name, as ComfyUI orders them; a batch gives a stream per image
            images = references[name]
            if images is None:
                continue
            for i in range(images.shape[0]):
                streams.append(await encode_video(vae, long_edge_resize(images[i : i + 1], ref_max_size)))
        if streams:
            positive = set_values(positive, {"context_latents": streams})
            negative = set_values(negative, {"context_latents": streams})
        return positive, negative, {"samples": latent}


NODE_CLASS_MAPPINGS = {"BerniniConditioning": BerniniConditioning}
NODE_DISPLAY_NAME_MAPPINGS = {"BerniniConditioning": "Bernini Conditioning"}
