"""ComfyUI's comfy_extras.nodes_model_downscale: PatchModelAddDownscale (Kohya's Deep Shrink), an input-block
and an output-block patch carried on the MODEL (nodes.modelfns.network_patches).

While sigma is in [start, end] the UNet's features after input block `block_number` are shrunk by
`downscale_factor`; a decoder feature map that no longer matches its skip connection is resized to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_model
from nodes.modelfns.model_options import sampling_config
from nodes.modelfns.network_patches import with_network_patch
from nodes.sampling.model_sampling import model_sampling_from_config
from nodes.upscale import common_upscale

MODULE = "comfy_extras.nodes_model_downscale"
METHODS = ["bicubic", "nearest-exact", "bilinear", "area", "bislerp"]


@dataclass(frozen=True)
class Downscale:
    """input_block_patch(_after_skip): shrink the output of one input block while sigma is in range."""

    block_number: int
    factor: float
    sigma_start: float
    sigma_end: float
    method: str

    def __call__(self, h: torch.Tensor, options: dict) -> torch.Tensor:
        if options["block"][1] != self.block_number:
            return h
        sigma = float(options["sigmas"][0])
        if not self.sigma_end <= sigma <= self.sigma_start:
            return h
        return common_upscale(
            h, round(h.shape[-1] / self.factor), round(h.shape[-2] / self.factor), self.method, "disabled"
        )


@dataclass(frozen=True)
class MatchSkip:
    """output_block_patch: resize h to its skip connection's size when a downscale made them differ."""

    method: str

    def __call__(self, h: torch.Tensor, hsp: torch.Tensor, options: dict) -> tuple[torch.Tensor, torch.Tensor]:
        if h.shape[2] != hsp.shape[2]:
            h = common_upscale(h, hsp.shape[-1], hsp.shape[-2], self.method, "disabled")
        return h, hsp


class PatchModelAddDownscale:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "model_patches/unet"
    DESCRIPTION = (
        "Deep Shrink: runs the UNet's deeper blocks on downscaled features during the first part of "
        "sampling, which keeps large images coherent."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "block_number": (
                    "INT",
                    {
                        "default": 3,
                        "min": 1,
                        "max": 32,
                        "step": 1,
                        "tooltip": "The input block (ldm numbering) after which features shrink.",
                    },
                ),
                "downscale_factor": ("FLOAT", {"default": 2.0, "min": 0.1, "max": 9.0, "step": 0.001}),
                "start_percent": ("FLOAT", {"default": 0.0, "min": 0.0, "max": 1.0, "step": 0.001}),
                "end_percent": ("FLOAT", {"default": 0.35, "min": 0.0, "max": 1.0, "step": 0.001}),
                "downscale_after_skip": (
                    "BOOLEAN",
                    {"default": True, "tooltip": "Keep the skip connection at full size."},
                ),
                "downscale_method": ("COMBO", {"multiselect": False, "options": METHODS}),
                "upscale_method": ("COMBO", {"multiselect": False, "options": METHODS}),
            }
        }

    def patch(
        self,
        model: Any,
        block_number: int,
        downscale_factor: float,
        start_percent: float,
        end_percent: float,
        downscale_after_skip: bool,
        downscale_method: str,
        upscale_method: str,
    ) -> tuple[ModelRef]:
        require_model(model)
        for name, method in (("downscale_method", downscale_method), ("upscale_method", upscale_method)):
            if method not in METHODS:
                raise ValueError(f"{name}: unknown value {method!r}")
        ms = model_sampling_from_config(sampling_config(model))
        down = Downscale(
            int(block_number),
            float(downscale_factor),
            float(ms.percent_to_sigma(start_percent)),
            float(ms.percent_to_sigma(end_percent)),
            downscale_method,
        )
        hook = "input_block_patch_after_skip" if downscale_after_skip else "input_block_patch"
        model = with_network_patch(model, hook, down)
        return (with_network_patch(model, "output_block_patch", MatchSkip(upscale_method)),)


NODE_CLASS_MAPPINGS = {"PatchModelAddDownscale": PatchModelAddDownscale}
NODE_DISPLAY_NAME_MAPPINGS = {"PatchModelAddDownscale": "PatchModelAddDownscale (Kohya Deep Shrink)"}
