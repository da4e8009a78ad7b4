"""ComfyUI's unCLIPCheckpointLoader and unCLIPConditioning (nodes.py).

The loader is CheckpointLoaderSimple that also hands out the checkpoint's image encoder (SD2.1 unCLIP files keep it
under `embedder.model.visual.`). unCLIPConditioning only records the image embedding with its strength and noise
augmentation on every entry, appended to what earlier unCLIPConditioning nodes recorded; the denoising step turns
them into the UNet's ADM input with the sampling seed (nodes/models/unclip.py), as ComfyUI's model does."""

from __future__ import annotations

import torch

from nodes.conditioning import require
from nodes.library.clip_vision import COMPONENT
from nodes.loaders import CheckpointLoaderSimple, make_ref, model_file, model_files, probe_arch

UNCLIP_KEY = "unclip_conditioning"  # ComfyUI's name of the entries' list


class unCLIPCheckpointLoader(CheckpointLoaderSimple):
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"ckpt_name": (model_files("checkpoints"),)}}

    RETURN_TYPES = ("MODEL", "CLIP", "VAE", "CLIP_VISION")
    OUTPUT_TOOLTIPS = (*CheckpointLoaderSimple.OUTPUT_TOOLTIPS, "The image encoder for unCLIP conditioning.")
    DESCRIPTION = "Loads an unCLIP checkpoint: its diffusion model, text encoder, VAE and image encoder."

    def load_checkpoint(self, ckpt_name):
        model, clip, vae = super().load_checkpoint(ckpt_name)
        path = model_file("checkpoints", ckpt_name, "ckpt_name")
        _, parts = probe_arch(path, "ckpt_name")
        if "clip_vision" not in parts:
            # ComfyUI returns None here and fails later at CLIPVisionEncode; name the file now
            raise ValueError(
                f"ckpt_name: {ckpt_name!r} holds no CLIP vision model (an unCLIP checkpoint keeps one under "
                "embedder.model.visual.); load other checkpoints with Load Checkpoint"
            )
        return (model, clip, vae, make_ref(COMPONENT, "clip_vision", [path]))


class unCLIPConditioning:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "conditioning": ("CONDITIONING",),
                "clip_vision_output": ("CLIP_VISION_OUTPUT",),
                "strength": ("FLOAT", {"default": 1.0, "min": -10.0, "max": 10.0, "step": 0.01}),
                "noise_augmentation": ("FLOAT", {"default": 0.0, "min": 0.0, "max": 1.0, "step": 0.01}),
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "apply_adm"
    CATEGORY = "conditioning"

    def apply_adm(self, conditioning, clip_vision_output, strength: float, noise_augmentation: float):
        conditioning = require(conditioning, "conditioning")
        embeds = getattr(clip_vision_output, "image_embeds", None)
        if not isinstance(embeds, torch.Tensor) or embeds.dim() != 2:
            raise ValueError("clip_vision_output: expected a CLIP Vision Encode output with image embeddings [B, D]")
        if strength == 0:
            return (conditioning,)
        item = {
            "clip_vision_output": clip_vision_output,
            "strength": strength,
            "noise_augmentation": noise_augmentation,
        }
        return ([[cond, {**opts, UNCLIP_KEY: [*opts.get(UNCLIP_KEY, []), item]}] for cond, opts in conditioning],)


NODE_CLASS_MAPPINGS = {"unCLIPCheckpointLoader": unCLIPCheckpointLoader, "unCLIPConditioning": unCLIPConditioning}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
