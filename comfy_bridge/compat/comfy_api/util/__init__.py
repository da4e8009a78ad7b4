"""`comfy_api.util`: the video helper types."""

from comfy_bridge.compat.comfy_api.latest._types import VideoCodec, VideoComponents, VideoContainer  # noqa: F401

__all__ = ["VideoContainer", "VideoCodec", "VideoComponents"]
