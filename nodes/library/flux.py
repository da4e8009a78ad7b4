"""Flux conditioning nodes of ComfyUI's comfy_extras.nodes_flux: CLIPTextEncodeFlux, FluxDisableGuidance,
FluxKontextImageScale and FluxKontextMultiReferenceLatentMethod (FluxGuidance lives with the core conditioning
nodes, nodes/conditioning_ops.py)."""

from __future__ import annotations

import torch

from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.inputs import require_component
from nodes.library.clip_sdxl import TEXT, encode_conditioning
from nodes.upscale import common_upscale

MODULE = "comfy_extras.nodes_flux"
# The resolutions (width, height) Flux Kontext was trained at, all about one megapixel.
KONTEXT_RESOLUTIONS = (
    (672, 1568),
    (688, 1504),
    (720, 1456),
    (752, 1392),
    (800, 1328),
    (832, 1248),
    (880, 1184),
    (944, 1104),
    (1024, 1024),
    (1104, 944),
    (1184, 880),
    (1248, 832),
    (1328, 800),
    (1392, 752),
    (1456, 720),
    (1504, 688),
    (1568, 672),
)


class CLIPTextEncodeFlux:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "clip": ("CLIP", {}),
                "clip_l": TEXT,
                "t5xxl": TEXT,
                "guidance": (
                    "FLOAT",
                    {
                        "default": 3.5,
                        "min": 0.0,
                        "max": 100.0,
                        "step": 0.1,
                        "tooltip": "Guidance strength a guidance-distilled Flux model is conditioned on.",
                    },
                ),
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "execute"
    CATEGORY = "advanced/conditioning/flux"
    DESCRIPTION = (
        "Encodes one prompt for Flux's CLIP-L (the pooled vector) and one for its T5-XXL (the token "
        "embeddings), with the distilled guidance strength."
    )
    RELATIVE_PYTHON_MODULE = MODULE

    async def execute(self, clip, clip_l: str, t5xxl: str, guidance: float):
        clip = require_component(clip, "text_encoder", "clip")
        if clip.arch != "flux":
            raise ValueError(f"clip: CLIPTextEncodeFlux needs Flux's CLIP (CLIP-L and T5-XXL), got a {clip.arch} CLIP")
        return (await encode_conditioning(clip, {"texts": {"l": clip_l, "t5xxl": t5xxl}}, {"guidance": guidance}),)


class FluxDisableGuidance:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"conditioning": ("CONDITIONING", {})}}

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "execute"
    CATEGORY = "advanced/conditioning/flux"
    DESCRIPTION = (
        "Leaves the guidance embedding out of a guidance-distilled Flux model's conditioning "
        "(not even the default of 3.5)."
    )
    RELATIVE_PYTHON_MODULE = MODULE

    def execute(self, conditioning: list):
        # None, not a missing key: the model then adds no guidance embedding at all.
        return (set_values(require(conditioning, "conditioning"), {"guidance": None}),)


class FluxKontextImageScale:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE", {})}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "execute"
    CATEGORY = "advanced/conditioning/flux"
    DESCRIPTION = (
        "Resizes the image (Lanczos, centre-cropped) to the Flux Kontext training resolution whose "
        "aspect ratio is nearest to its own."
    )
    RELATIVE_PYTHON_MODULE = MODULE

    def execute(self, image: torch.Tensor):
        if not isinstance(image, torch.Tensor) or image.ndim != 4:
            raise ValueError("image: expected an IMAGE [B,H,W,C]")
        aspect = image.shape[2] / image.shape[1]
        # Nearest aspect ratio; a tie goes to the smaller width, as in ComfyUI.
        _, width, height = min((abs(aspect - w / h), w, h) for w, h in KONTEXT_RESOLUTIONS)
        return (common_upscale(image.movedim(-1, 1), width, height, "lanczos", "center").movedim(1, -1),)


class FluxKontextMultiReferenceLatentMethod:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "conditioning": ("CONDITIONING", {}),
                "reference_latents_method": (
                    "COMBO",
                    {
                        "multiselect": False,
                        "options": ["offset", "index", "uxo/uno", "index_timestep_zero"],
                        "tooltip": "offset: references side by side in one extra frame; index: one "
                        "frame each; uxo/uno: placed diagonally past the image (USO/UNO); "
                        "index_timestep_zero: one frame each, modulated as at timestep 0 "
                        "(Qwen-Image-Edit 2511).",
                    },
                ),
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "execute"
    CATEGORY = "advanced/conditioning/flux"
    EXPERIMENTAL = True
    DESCRIPTION = "Chooses where Flux Kontext places several reference latents (ReferenceLatent) in position space."
    RELATIVE_PYTHON_MODULE = MODULE

    def execute(self, conditioning: list, reference_latents_method: str):
        method = (
            "uxo"
            if "uxo" in reference_latents_method or "uso" in reference_latents_method
            else reference_latents_method
        )
        return (set_values(require(conditioning, "conditioning"), {"reference_latents_method": method}),)


NODE_CLASS_MAPPINGS = {
    "CLIPTextEncodeFlux": CLIPTextEncodeFlux,
    "FluxDisableGuidance": FluxDisableGuidance,
    "FluxKontextImageScale": FluxKontextImageScale,
    "FluxKontextMultiReferenceLatentMethod": FluxKontextMultiReferenceLatentMethod,
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
