"""ComfyUI's comfy_extras.nodes_pixart: CLIPTextEncodePixArtAlpha. The prompt is encoded as CLIPTextEncode encodes
it and the width and height travel in the conditioning entry; PixArt-α reads them as its size and aspect-ratio
micro-conditions (nodes.models.pixart), PixArt-Σ has none and ignores them, as in ComfyUI."""

from __future__ import annotations

from nodes.conditioning_ops import MAX_RESOLUTION
from nodes.inputs import require_component
from nodes.library.clip_sdxl import TEXT, encode_conditioning

SIZE = {"min": 0, "max": MAX_RESOLUTION}


class CLIPTextEncodePixArtAlpha:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "width": ("INT", {"default": 1024, **SIZE}),
                "height": ("INT", {"default": 1024, **SIZE}),
                "text": TEXT,
                "clip": ("CLIP", {}),
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "execute"
    CATEGORY = "advanced/conditioning"
    DESCRIPTION = "Encodes text and sets the resolution conditioning for PixArt Alpha. Does not apply to PixArt Sigma."
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_pixart"

    async def execute(self, width: int, height: int, text: str, clip):
        clip = require_component(clip, "text_encoder", "clip")
        return (await encode_conditioning(clip, {"text": text}, {"width": width, "height": height}),)


NODE_CLASS_MAPPINGS = {"CLIPTextEncodePixArtAlpha": CLIPTextEncodePixArtAlpha}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
