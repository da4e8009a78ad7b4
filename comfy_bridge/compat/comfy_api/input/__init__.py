"""`comfy_api.input`: the value types (ComfyUI's stable path to them)."""
from comfy_bridge.compat.comfy_api.latest._types import (AudioInput, ImageInput, LatentInput, MaskInput,  # noqa: F401
                                                         VideoInput)

__all__ = ["ImageInput", "AudioInput", "MaskInput", "LatentInput", "VideoInput"]
