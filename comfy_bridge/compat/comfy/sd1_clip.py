"""`comfy.sd1_clip`: ComfyUI's SD1 text encoder classes, names packs check a CLIP against or list (Easy-Use
lists SD1ClipModel among the models to unload). Building one refuses (see text_encoder_classes)."""
from __future__ import annotations

from comfy_bridge.compat.comfy.text_encoder_classes import refusing_class

MODULE = "comfy.sd1_clip"

ClipTokenWeightEncoder = refusing_class(MODULE, "ClipTokenWeightEncoder", object)
SDClipModel = refusing_class(MODULE, "SDClipModel")
SD1ClipModel = refusing_class(MODULE, "SD1ClipModel")
SDTokenizer = refusing_class(MODULE, "SDTokenizer", object)
SD1Tokenizer = refusing_class(MODULE, "SD1Tokenizer", object)

__all__ = ["ClipTokenWeightEncoder", "SDClipModel", "SD1ClipModel", "SDTokenizer", "SD1Tokenizer"]
