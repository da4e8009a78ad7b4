"""`comfy.taesd.taehv`: the Tiny AutoEncoder for video. `conv` and `Clamp` are the image TAESD's; the video
model and its frame-memory runner need ComfyUI's in-process VAE objects (previews run on the executors)."""
from __future__ import annotations

from typing import Any

from comfy_bridge.compat.comfy.ldm.model_classes import WHY, UnsupportedModel
from comfy_bridge.compat.comfy.taesd.taesd import Clamp, conv  # noqa: F401
from comfy_bridge.packs.origin import UnsupportedFeature


class MemBlock(UnsupportedModel):
    pass


class TPool(UnsupportedModel):
    pass


class TGrow(UnsupportedModel):
    pass


class TAEHV(UnsupportedModel):
    pass


def apply_model_with_memblocks(model: Any, x: Any, parallel: bool, show_progress_bar: bool) -> Any:
    raise UnsupportedFeature("comfy.taesd.taehv.apply_model_with_memblocks", WHY)
