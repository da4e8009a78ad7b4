"""`comfy.cldm.cldm`: the ControlNet model class names. They exist for imports, subclassing and isinstance
checks; building one raises UnsupportedFeature (see comfy.ldm.model_classes): this backend loads and runs
ControlNets in its own engine (ControlNetLoader / ControlNetApply)."""

from __future__ import annotations

from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel
from comfy_bridge.compat.comfy.ldm.modules.diffusionmodules.openaimodel import UNetModel

__all__ = ["ControlNet", "ControlledUnetModel"]


class ControlledUnetModel(UNetModel):
    """ComfyUI's name for a UNetModel that takes ControlNet residuals."""


class ControlNet(UnsupportedModel):
    """The SD ControlNet (a UNet encoder copy with zero convs)."""
