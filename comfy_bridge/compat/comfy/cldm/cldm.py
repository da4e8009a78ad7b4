"""`comfy.cldm.cldm`: the ControlNet model class names. They exist for imports, subclassing and isinstance
checks; building one raises UnsupportedFeature (see comfy.ldm.model_classes): this backend loads and runs
ControlNets in its own engine (ControlNetLoader / ControlNetApply)."""
from __future__ import annotations

from comfy_bridge.compat.comfy.ldm.model_classes import UnsupportedModel
from comfy_bridge.compat.comfy.ldm.modules.diffusionmodules.openaimodel import UNetModel

__all__ = ["ControlNet", "ControlledUnetModel"]


class ControlledUnetModel(UNetModel):
    comfy_name = "comfy.cldm.cldm.ControlledUnetModel"


class ControlNet(UnsupportedModel):
    comfy_name = "comfy.cldm.cldm.ControlNet"
