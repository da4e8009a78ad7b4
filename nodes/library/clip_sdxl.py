"""SDXL's text encoders with size conditioning (ComfyUI's comfy_extras.nodes_clip_sdxl).

The sizes travel in the conditioning entry (width, height, crop_w, crop_h, target_width, target_height) and
reach the SDXL UNet as its time_ids (nodes.modelfns.denoise); the refiner's aesthetic score is kept in the
entry as ComfyUI keeps it, for the refiner model that reads it.
"""

from __future__ import annotations

from nodes.conditioning_ops import MAX_RESOLUTION
from nodes.inputs import require_component
from nodes.ksampler import call_model_fn
from nodes.modelfns.hooks import encodings

MODULE = "comfy_extras.nodes_clip_sdxl"
TEXT = ("STRING", {"multiline": True, "dynamicPrompts": True})


def _size(default: int, tip: str) -> tuple:
    return ("INT", {"default": default, "min": 0, "max": MAX_RESOLUTION, "tooltip": tip})


async def encode_conditioning(clip, params: dict, add: dict) -> list:
    """CONDITIONING of the text_encode params with `add` in each entry: one entry, or one per keyframe range of
    a scheduled hooked CLIP (as CLIPTextEncode does)."""
    conditioning = []
    for ref, extra in encodings(clip):
        out = await call_model_fn("text_encode", ref, "clip", {}, params)
        conditioning.append([out["cond"], {"pooled_output": out.get("pooled"), **add, **extra}])
    return conditioning


class CLIPTextEncodeSDXL:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "clip": ("CLIP", {}),
                "width": _size(1024, "Original image width the model is told the image had."),
                "height": _size(1024, "Original image height the model is told the image had."),
                "crop_w": _size(0, "Left crop offset the model is told (0: uncropped)."),
                "crop_h": _size(0, "Top crop offset the model is told (0: uncropped)."),
                "target_width": _size(1024, "Width of the image the model is asked for."),
                "target_height": _size(1024, "Height of the image the model is asked for."),
                "text_g": TEXT,
                "text_l": TEXT,
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "execute"
    CATEGORY = "advanced/conditioning"
    DESCRIPTION = (
        "Encodes separate prompts for SDXL's two text encoders (G and L) and conditions the model on "
        "the original size, crop and target size."
    )
    RELATIVE_PYTHON_MODULE = MODULE

    async def execute(
        self,
        clip,
        width: int,
        height: int,
        crop_w: int,
        crop_h: int,
        target_width: int,
        target_height: int,
        text_g: str,
        text_l: str,
    ):
        clip = require_component(clip, "text_encoder", "clip")
        if clip.arch != "sdxl":
            raise ValueError(f"clip: CLIPTextEncodeSDXL needs SDXL's CLIP (L and G), got a {clip.arch} CLIP")
        params = {"texts": {"g": text_g, "l": text_l}, "equal_chunks": True}
        return (
            await encode_conditioning(
                clip,
                params,
                {
                    "width": width,
                    "height": height,
                    "crop_w": crop_w,
                    "crop_h": crop_h,
                    "target_width": target_width,
                    "target_height": target_height,
                },
            ),
        )


class CLIPTextEncodeSDXLRefiner:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "ascore": (
                    "FLOAT",
                    {
                        "default": 6.0,
                        "min": 0.0,
                        "max": 1000.0,
                        "step": 0.01,
                        "tooltip": "Aesthetic score the SDXL refiner is conditioned on.",
                    },
                ),
                "width": _size(1024, "Image width the model is told."),
                "height": _size(1024, "Image height the model is told."),
                "text": TEXT,
                "clip": ("CLIP", {}),
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "execute"
    CATEGORY = "advanced/conditioning"
    DESCRIPTION = "Encodes a prompt with the aesthetic score and image size the SDXL refiner is conditioned on."
    RELATIVE_PYTHON_MODULE = MODULE

    async def execute(self, clip, ascore: float, width: int, height: int, text: str):
        clip = require_component(clip, "text_encoder", "clip")
        return (
            await encode_conditioning(
                clip, {"text": text}, {"aesthetic_score": ascore, "width": width, "height": height}
            ),
        )


NODE_CLASS_MAPPINGS = {"CLIPTextEncodeSDXLRefiner": CLIPTextEncodeSDXLRefiner, "CLIPTextEncodeSDXL": CLIPTextEncodeSDXL}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
