"""Cosmos image-to-video latents (ComfyUI 0.3.64's comfy_extras.nodes_cosmos): CosmosPredict2ImageToVideoLatent for
Cosmos Predict2 Video2World (the Wan 2.1 VAE, 4 frames a latent frame) and CosmosImageToVideoLatent for Cosmos 1.0.

Both encode a start and/or end image (resized, bilinear and centre-cropped) padded with grey 0.5 frames to the clip
length ComfyUI computes with Cosmos 1.0's 8-frame step, keep the first latent frames of it, and mark them kept in a
noise mask [B,1,T,H,W] (0 = kept). The Predict2 node fills every other frame with the Wan 2.1 latent format's mean
(its process_out of zeros), as ComfyUI's does. Cosmos 1.0's VAE (a causal 8x8x8 tokenizer) is not implemented here:
CosmosImageToVideoLatent gives its all-zero latent without images and refuses images by name."""

from __future__ import annotations

import torch

from nodes import MAX_RESOLUTION
from nodes.library.wan import encode_video, fit_frames
from nodes.models.components import WAN21_LATENT


def _inputs(width: int, height: int, length: int, length_step: int) -> dict:
    return {
        "required": {
            "vae": ("VAE",),
            "width": ("INT", {"default": width, "min": 16, "max": MAX_RESOLUTION, "step": 16}),
            "height": ("INT", {"default": height, "min": 16, "max": MAX_RESOLUTION, "step": 16}),
            "length": ("INT", {"default": length, "min": 1, "max": MAX_RESOLUTION, "step": length_step}),
            "batch_size": ("INT", {"default": 1, "min": 1, "max": 4096}),
        },
        "optional": {"start_image": ("IMAGE",), "end_image": ("IMAGE",)},
    }


async def encode_padded(vae, image: torch.Tensor, width: int, height: int, length: int, padding: int) -> torch.Tensor:
    """nodes_cosmos' vae_encode_with_padding: the frames (at most `length`) at width x height, then grey up to the
    clip length ComfyUI derives with an 8-frame step (`padding` extra steps), encoded; the latent frames the given
    frames span at 8 frames each are kept."""
    pixels = fit_frames(image[..., :3], width, height)
    pixel_len = min(pixels.shape[0], length)
    padded_length = min(length, (((pixel_len - 1) // 8) + 1 + padding) * 8 - 7)
    clip = torch.full((padded_length, height, width, 3), 0.5)
    clip[:pixel_len] = pixels[:pixel_len]
    latent = await encode_video(vae, clip)
    return latent[:, :, : ((pixel_len - 1) // 8) + 1]


class CosmosPredict2ImageToVideoLatent:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_cosmos"
    FUNCTION = "execute"
    CATEGORY = "conditioning/inpaint"
    RETURN_TYPES = ("LATENT",)
    DESCRIPTION = (
        "A Cosmos Predict2 Video2World latent: start and/or end images encoded by the Wan 2.1 VAE and kept by a noise "
        "mask; the other frames are generated."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return _inputs(848, 480, 93, 4)

    async def execute(
        self,
        vae,
        width: int,
        height: int,
        length: int,
        batch_size: int,
        start_image: torch.Tensor | None = None,
        end_image: torch.Tensor | None = None,
    ):
        frames = ((length - 1) // 4) + 1
        latent = torch.zeros(1, 16, frames, height // 8, width // 8)
        if start_image is None and end_image is None:
            return ({"samples": latent},)  # ComfyUI's: one latent whatever batch_size, no mask
        mask = torch.ones(1, 1, frames, height // 8, width // 8)
        if start_image is not None:
            encoded = await encode_padded(vae, start_image, width, height, length, padding=1)
            latent[:, :, : encoded.shape[2]] = encoded
            mask[:, :, : encoded.shape[2]] = 0.0
        if end_image is not None:
            encoded = await encode_padded(vae, end_image, width, height, length, padding=0)
            latent[:, :, -encoded.shape[2] :] = encoded
            mask[:, :, -encoded.shape[2] :] = 0.0
        latent = WAN21_LATENT.process_out(latent) * mask + latent * (1.0 - mask)
        repeat = (batch_size, 1, 1, 1, 1)
        return ({"samples": latent.repeat(repeat), "noise_mask": mask.repeat(repeat)},)


class CosmosImageToVideoLatent:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_cosmos"
    FUNCTION = "execute"
    CATEGORY = "conditioning/inpaint"
    RETURN_TYPES = ("LATENT",)
    DESCRIPTION = "A Cosmos 1.0 image-to-video latent (its all-zero latent; images need Cosmos 1.0's VAE)."

    @classmethod
    def INPUT_TYPES(cls):
        return _inputs(1280, 704, 121, 8)

    def execute(
        self,
        vae,
        width: int,
        height: int,
        length: int,
        batch_size: int,
        start_image: torch.Tensor | None = None,
        end_image: torch.Tensor | None = None,
    ):
        if start_image is not None or end_image is not None:
            raise NotImplementedError(
                "CosmosImageToVideoLatent: start_image / end_image need Cosmos 1.0's video VAE (its 8x8x8 causal "
                "tokenizer), which Comfy Cluster does not implement yet; Cosmos Predict2 Video2World uses "
                "CosmosPredict2ImageToVideoLatent with the Wan 2.1 VAE"
            )
        return ({"samples": torch.zeros(1, 16, ((length - 1) // 8) + 1, height // 8, width // 8)},)


NODE_CLASS_MAPPINGS = {
    "CosmosImageToVideoLatent": CosmosImageToVideoLatent,
    "CosmosPredict2ImageToVideoLatent": CosmosPredict2ImageToVideoLatent,
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
