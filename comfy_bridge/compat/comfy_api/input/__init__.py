"""`comfy_api.input`: the value types (ComfyUI's stable path to them)."""

from comfy_bridge.compat.comfy_api.latest._types import AudioInput, ImageInput, LatentInput, MaskInput, VideoInput
from nodes.library.curves import CurveInput, LinearCurve, MonotoneCubicCurve

__all__ = [
    "AudioInput",
    "CurveInput",
    "ImageInput",
    "LatentInput",
    "LinearCurve",
    "MaskInput",
    "MonotoneCubicCurve",
    "VideoInput",
]
