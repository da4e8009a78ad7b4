"""`comfy.sdxl_clip`: ComfyUI's SDXL text encoder classes. Packs use them to recognise the encoder inside a
CLIP (isinstance(clip.cond_stage_model, SDXLClipModel)); building an encoder refuses: text encoders run on the
executors, and a CLIP here is a reference to its weights (encode with CLIP.encode_from_tokens /
nodes.CLIPTextEncode). The tokenizers are real (comfy.tokenizers)."""

from __future__ import annotations

from comfy_bridge.compat.comfy.text_encoder_classes import refusing_class
from comfy_bridge.compat.comfy.tokenizers import SDXLClipGTokenizer, SDXLTokenizer

MODULE = "comfy.sdxl_clip"

SDXLClipG = refusing_class(MODULE, "SDXLClipG")
SDXLClipModel = refusing_class(MODULE, "SDXLClipModel")
SDXLRefinerClipModel = refusing_class(MODULE, "SDXLRefinerClipModel")
StableCascadeClipGTokenizer = refusing_class(MODULE, "StableCascadeClipGTokenizer", object)
StableCascadeTokenizer = refusing_class(MODULE, "StableCascadeTokenizer", object)
StableCascadeClipG = refusing_class(MODULE, "StableCascadeClipG")
StableCascadeClipModel = refusing_class(MODULE, "StableCascadeClipModel")

__all__ = [
    "SDXLClipG",
    "SDXLClipGTokenizer",
    "SDXLTokenizer",
    "SDXLClipModel",
    "SDXLRefinerClipModel",
    "StableCascadeClipGTokenizer",
    "StableCascadeTokenizer",
    "StableCascadeClipG",
    "StableCascadeClipModel",
]
