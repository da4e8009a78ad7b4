"""Kandinsky 5's conditioning and latent nodes (ComfyUI 0.10.0's comfy_extras.nodes_kandinsky5): Kandinsky5ImageToVideo
(NormalizeVideoLatentStart, of the same ComfyUI module, is nodes/library/latent_today.py).

Kandinsky5ImageToVideo gives the empty 16-channel video latent, [B,16,1+(length-1)//4,H/8,W/8]; with start frames
(resized bilinear with a centre crop) it encodes them as one clip with the VAE given and writes that latent into both
conditionings as time_dim_replace (the model writes the clean frames over its input's first frames) with a
concat_mask that is 0 on the latent frames they fix, and returns it as cond_latent (an empty LATENT without them).
ComfyUI checks no VAE family here; the models want the HunyuanVideo VAE's latent (16 channels, 4x frames, 8x size)."""

from __future__ import annotations

import torch

from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.inputs import require_component
from nodes.ksampler import call_model_fn
from nodes.library.wan import fit_frames, latent_frames
from nodes.video_inputs import video_inputs

LATENT_CHANNELS = 16
DOWNSCALE = 8


class Kandinsky5ImageToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_kandinsky5"
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent", "cond_latent")
    OUTPUT_TOOLTIPS = (
        None,
        None,
        "The empty video latent to sample.",
        "The start frames' clean latent, which the model writes over the first frames of its input.",
    )
    DESCRIPTION = "Kandinsky 5's empty video latent, conditioned on start frames when given."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                **video_inputs(768, 512, 121),
            },
            "optional": {"start_image": ("IMAGE", {})},
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
    ):
        positive, negative = require(positive, "positive"), require(negative, "negative")
        frames = latent_frames(length)
        latent = torch.zeros(batch_size, LATENT_CHANNELS, frames, height // DOWNSCALE, width // DOWNSCALE)
        cond_latent: dict = {}
        if start_image is not None:
            start = fit_frames(start_image[:length], width, height)[..., :3]
            vae = require_component(vae, "vae", "vae")
            out = await call_model_fn("vae_encode", vae, "vae", {"pixels": start.contiguous()}, {"video": True})
            encoded = out["latent"]
            cond_latent = {"samples": encoded}
            mask = torch.ones(1, 1, frames, latent.shape[-2], latent.shape[-1])
            mask[:, :, : latent_frames(start.shape[0])] = 0.0
            values = {"time_dim_replace": encoded, "concat_mask": mask}
            positive, negative = set_values(positive, values), set_values(negative, values)
        return positive, negative, {"samples": latent}, cond_latent


NODE_CLASS_MAPPINGS = {
    "Kandinsky5ImageToVideo": Kandinsky5ImageToVideo,
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
