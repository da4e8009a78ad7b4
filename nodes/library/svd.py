"""ComfyUI 0.3.64's Stable Video Diffusion nodes (comfy_extras.nodes_video_model; its CFG nodes are in video_cfg.py).

ImageOnlyCheckpointLoader loads an SVD checkpoint's diffusion model, CLIP image encoder and VAE (no text encoder).
SVD_img2vid_Conditioning encodes the start image twice: its CLIP image embedding is the positive conditioning
([1, images, D]; zeros for the negative) and its VAE latent, the image resized to width x height (bilinear, centre
crop) and noised by augmentation_level from torch's global generator as ComfyUI does, rides along as
concat_latent_image (zeros for the negative), with fps, motion_bucket_id and augmentation_level, which the model
embeds as its ADM input. The latent is video_frames empty SD latents: SVD's frames are the latent's batch.
ImageOnlyCheckpointSave writes the three back as one checkpoint in the keys ComfyUI writes.
Checked against ComfyUI 0.3.64 by tests/models/test_svd.py (scripts/record_comfyui_svd.py) and
tests/nodes/test_image_only_checkpoint_save.py (scripts/record_comfyui_image_only_checkpoint_save.py)."""

from __future__ import annotations

from typing import Any

import torch

from cluster.refs import ModelRef
from nodes import MAX_RESOLUTION
from nodes.library.clip_vision import COMPONENT as CLIP_VISION
from nodes.library.clip_vision import CLIPVisionEncode
from nodes.loaders import CheckpointLoaderSimple, make_ref, model_file, model_files, probe_arch

MODULE = "comfy_extras.nodes_video_model"
LATENT_CHANNELS, SCALE = 4, 8


class ImageOnlyCheckpointLoader:
    RELATIVE_PYTHON_MODULE = MODULE
    MODEL_FILE_INPUTS = CheckpointLoaderSimple.MODEL_FILE_INPUTS
    RETURN_TYPES = ("MODEL", "CLIP_VISION", "VAE")
    FUNCTION = "load_checkpoint"
    CATEGORY = "loaders/video_models"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"ckpt_name": (model_files("checkpoints"),)}}

    def load_checkpoint(self, ckpt_name: str) -> tuple[ModelRef, ModelRef | None, ModelRef | None]:
        path = model_file("checkpoints", ckpt_name, "ckpt_name")
        model, _, vae = CheckpointLoaderSimple().load_checkpoint(ckpt_name)
        _, parts = probe_arch(path, "ckpt_name")
        # ComfyUI returns None for a checkpoint without an image encoder, which fails later at its user
        clip_vision = make_ref(CLIP_VISION, "clip_vision", [path]) if "clip_vision" in parts else None
        return (model, clip_vision, vae)


class SVD_img2vid_Conditioning:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    FUNCTION = "encode"
    CATEGORY = "conditioning/video_models"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "clip_vision": ("CLIP_VISION",),
                "init_image": ("IMAGE",),
                "vae": ("VAE",),
                "width": ("INT", {"default": 1024, "min": 16, "max": MAX_RESOLUTION, "step": 8}),
                "height": ("INT", {"default": 576, "min": 16, "max": MAX_RESOLUTION, "step": 8}),
                "video_frames": ("INT", {"default": 14, "min": 1, "max": 4096}),
                "motion_bucket_id": ("INT", {"default": 127, "min": 1, "max": 1023}),
                "fps": ("INT", {"default": 6, "min": 1, "max": 1024}),
                "augmentation_level": ("FLOAT", {"default": 0.0, "min": 0.0, "max": 10.0, "step": 0.01}),
            }
        }

    async def encode(
        self,
        clip_vision: ModelRef,
        init_image: torch.Tensor,
        vae: Any,
        width: int,
        height: int,
        video_frames: int,
        motion_bucket_id: int,
        fps: int,
        augmentation_level: float,
    ):
        from nodes.inputs import require_component
        from nodes.ksampler import call_model_fn
        from nodes.upscale import common_upscale

        if not isinstance(init_image, torch.Tensor) or init_image.ndim != 4:
            raise ValueError("init_image: expected an IMAGE [batch, height, width, channels]")
        vae = require_component(vae, "vae", "vae")
        (vision,) = await CLIPVisionEncode().encode(clip_vision, init_image, "center")
        pooled = vision.image_embeds.unsqueeze(0)
        width, height = int(width), int(height)
        pixels = common_upscale(init_image.movedim(-1, 1), width, height, "bilinear", "center").movedim(1, -1)
        pixels = pixels[..., :3]
        if augmentation_level > 0:  # unseeded, from torch's global generator, as ComfyUI draws it
            pixels = pixels + torch.randn_like(pixels) * float(augmentation_level)
        out = await call_model_fn("vae_encode", vae, "vae", {"pixels": pixels.contiguous()}, {})
        encoded = out["latent"]
        options = {"motion_bucket_id": motion_bucket_id, "fps": fps, "augmentation_level": augmentation_level}
        positive = [[pooled, {**options, "concat_latent_image": encoded}]]
        negative = [[torch.zeros_like(pooled), {**options, "concat_latent_image": torch.zeros_like(encoded)}]]
        latent = torch.zeros([int(video_frames), LATENT_CHANNELS, height // SCALE, width // SCALE])
        return (positive, negative, {"samples": latent})


class ImageOnlyCheckpointSave:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ()
    FUNCTION = "save"
    OUTPUT_NODE = True
    CATEGORY = "advanced/model_merging"
    DESCRIPTION = (
        "Writes a Stable Video Diffusion model, its CLIP image encoder and VAE as one .safetensors checkpoint in "
        "the output folder, in the layout ImageOnlyCheckpointLoader reads."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "clip_vision": ("CLIP_VISION",),
                "vae": ("VAE",),
                "filename_prefix": ("STRING", {"default": "checkpoints/ComfyUI"}),
            },
            "hidden": {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"},
        }

    def save(
        self,
        model: ModelRef,
        clip_vision: ModelRef,
        vae: ModelRef,
        filename_prefix: str,
        prompt: Any = None,
        extra_pnginfo: dict | None = None,
    ) -> dict:
        from nodes.library.model_merging import save_image_only_checkpoint

        save_image_only_checkpoint(filename_prefix, model, clip_vision, vae, prompt, extra_pnginfo)
        return {}


NODE_CLASS_MAPPINGS = {
    "ImageOnlyCheckpointLoader": ImageOnlyCheckpointLoader,
    "SVD_img2vid_Conditioning": SVD_img2vid_Conditioning,
    "ImageOnlyCheckpointSave": ImageOnlyCheckpointSave,
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
