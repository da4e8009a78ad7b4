"""`comfy.sdxl_clip`: ComfyUI's SDXL text encoder classes. Packs use them to recognise the encoder inside a
CLIP (isinstance(clip.cond_stage_model, SDXLClipModel)); building one refuses: text encoders run on the
executors, and a CLIP here is a reference to its weights (encode with CLIP.encode_from_tokens /
nodes.CLIPTextEncode)."""
from __future__ import annotations

from typing import Any

import torch

from comfy_bridge.packs.origin import UnsupportedFeature


def _refusing(name: str, base: type = torch.nn.Module) -> type:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedFeature(f"comfy.sdxl_clip.{name}(...)", "text encoders are built and run on the executors; "
                                 "a CLIP is a reference to its weights (use CLIP.encode_from_tokens)")
    return type(name, (base,), {"__init__": __init__, "__module__": __name__,
                                "__doc__": f"ComfyUI's {name} (a name to check against; building one refuses)."})


SDXLClipG = _refusing("SDXLClipG")
SDXLClipGTokenizer = _refusing("SDXLClipGTokenizer", object)
SDXLTokenizer = _refusing("SDXLTokenizer", object)
SDXLClipModel = _refusing("SDXLClipModel")
SDXLRefinerClipModel = _refusing("SDXLRefinerClipModel")
StableCascadeClipGTokenizer = _refusing("StableCascadeClipGTokenizer", object)
StableCascadeTokenizer = _refusing("StableCascadeTokenizer", object)
StableCascadeClipG = _refusing("StableCascadeClipG")
StableCascadeClipModel = _refusing("StableCascadeClipModel")

__all__ = ["SDXLClipG", "SDXLClipGTokenizer", "SDXLTokenizer", "SDXLClipModel", "SDXLRefinerClipModel",
           "StableCascadeClipGTokenizer", "StableCascadeTokenizer", "StableCascadeClipG", "StableCascadeClipModel"]
