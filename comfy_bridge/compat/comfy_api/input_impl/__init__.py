"""`comfy_api.input_impl`: the VIDEO implementations."""

from comfy_bridge.compat.comfy_api.latest._types import VideoFromComponents, VideoFromFile  # noqa: F401

__all__ = ["VideoFromFile", "VideoFromComponents"]
