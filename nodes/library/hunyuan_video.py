"""HunyuanVideo 1.0's image-to-video nodes (ComfyUI 0.3.64's comfy_extras.nodes_hunyuan): HunyuanImageToVideo and
TextEncodeHunyuanVideo_ImageToVideo (the prompt in the image-to-video template with the start image's llava-projected
CLIP vision tokens in place of its <image> token, every image_interleave-th of their states kept before the text's:
nodes/models/hunyuan_video_text.py).

It gives the empty 16-channel video latent, [B,16,1+(length-1)//4,H/8,W/8]. With a start image (its first `length`
frames resized bilinear with a centre crop, encoded as one clip by the VAE given) it conditions `positive` by the
guidance type the image-to-video file was trained for:
- "v1 (concat)" (hunyuan_video_image_to_video, 33 input channels): the image latent as concat_latent_image and a
  concat_mask that is 0 on the latent frames the image covers (the model joins the latent and 1 - mask);
- "v2 (replace)" (hunyuan_video_v2_replace_image_to_video, 16 channels): guiding_frame_index 0 (the first frame's
  tokens modulated at timestep 0), the image latent written into the returned latent's first frames and that mask as
  its noise_mask, so sampling keeps those frames clean;
- "custom": the image latent as ref_latent (its tokens precede the video's).
ComfyUI checks no VAE family here; the models want HunyuanVideo's VAE (16 channels, 4x frames, 8x size)."""

from __future__ import annotations

import torch

from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.inputs import require_component
from nodes.ksampler import call_model_fn
from nodes.library.wan import fit_frames, latent_frames
from nodes.modelfns.hooks import encodings
from nodes.models.hunyuan_video_text import I2V_TEMPLATE
from nodes.video_inputs import batch_input, video_length, video_size

LATENT_CHANNELS = 16
DOWNSCALE = 8
GUIDANCE_TYPES = ["v1 (concat)", "v2 (replace)", "custom"]


class HunyuanImageToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_hunyuan"
    FUNCTION = "encode"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "latent")
    DESCRIPTION = "HunyuanVideo 1.0's empty video latent, conditioned on a start image in the model's own way."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "positive": ("CONDITIONING", {}),
                "vae": ("VAE", {}),
                "width": video_size(848),
                "height": video_size(480),
                "length": video_length(53),
                "batch_size": batch_input(),
                "guidance_type": (GUIDANCE_TYPES, {}),
            },
            "optional": {"start_image": ("IMAGE", {})},
        }

    async def encode(
        self,
        positive,
        vae,
        width: int,
        height: int,
        length: int,
        batch_size: int,
        guidance_type: str,
        start_image: torch.Tensor | None = None,
    ):
        positive = require(positive, "positive")
        if guidance_type not in GUIDANCE_TYPES:
            raise ValueError(f"guidance_type: {guidance_type!r} is not one of {', '.join(GUIDANCE_TYPES)}")
        frames = latent_frames(length)
        latent = torch.zeros(batch_size, LATENT_CHANNELS, frames, height // DOWNSCALE, width // DOWNSCALE)
        out: dict = {}
        if start_image is not None:
            start = fit_frames(start_image[:length][..., :3], width, height)
            vae = require_component(vae, "vae", "vae")
            encoded = (await call_model_fn("vae_encode", vae, "vae", {"pixels": start.contiguous()}, {"video": True}))[
                "latent"
            ]
            mask = torch.ones(1, 1, frames, encoded.shape[-2], encoded.shape[-1])
            mask[:, :, : latent_frames(start.shape[0])] = 0.0
            if guidance_type == "v1 (concat)":
                values = {"concat_latent_image": encoded, "concat_mask": mask}
            elif guidance_type == "v2 (replace)":
                values = {"guiding_frame_index": 0}
                latent[:, :, : encoded.shape[2]] = encoded
                out["noise_mask"] = mask
            else:
                values = {"ref_latent": encoded}
            positive = set_values(positive, values)
        out["samples"] = latent
        return positive, out


class TextEncodeHunyuanVideo_ImageToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_hunyuan"
    FUNCTION = "encode"
    CATEGORY = "advanced/conditioning"
    RETURN_TYPES = ("CONDITIONING",)
    DESCRIPTION = "HunyuanVideo 1.0's image-to-video prompt: the text with the start image's llava image tokens."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "clip": ("CLIP", {}),
                "clip_vision_output": ("CLIP_VISION_OUTPUT", {}),
                "prompt": ("STRING", {"multiline": True, "dynamicPrompts": True}),
                "image_interleave": (
                    "INT",
                    {
                        "default": 2,
                        "min": 1,
                        "max": 512,
                        "tooltip": "Keep every n-th of the image's token states: higher gives the text more weight.",
                    },
                ),
            }
        }

    async def encode(self, clip, clip_vision_output, prompt: str, image_interleave: int):
        projected = getattr(clip_vision_output, "mm_projected", None)
        if projected is None:
            raise ValueError(
                "clip_vision_output: it has no projected image tokens (mm_projected): encode the image with "
                "llava-llama3's vision file (llava_llama3_vision) loaded by CLIPVisionLoader"
            )
        require_component(clip, "text_encoder", "clip")
        params = {"text": prompt, "images": 1, "template": I2V_TEMPLATE, "image_interleave": int(image_interleave)}
        conditioning = []
        for ref, extra in encodings(clip):
            out = await call_model_fn("text_encode", ref, "clip", {"image0": projected}, params)
            conditioning.append([out["cond"], {"pooled_output": out.get("pooled"), **extra}])
        return (conditioning,)


NODE_CLASS_MAPPINGS = {
    "HunyuanImageToVideo": HunyuanImageToVideo,
    "TextEncodeHunyuanVideo_ImageToVideo": TextEncodeHunyuanVideo_ImageToVideo,
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
