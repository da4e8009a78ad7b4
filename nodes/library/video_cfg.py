"""ComfyUI's comfy_extras.nodes_video_model: VideoLinearCFGGuidance and VideoTriangleCFGGuidance, CFG
replacements (sampler_cfg_function, carried on the MODEL by nodes.modelfns.model_options) that give each batch
entry, a video's frame, its own guidance scale between min_cfg and the sampler's cfg. The arithmetic works
on any MODEL's batch. ConditioningSetAreaPercentageVideo: an area in fractions of a video latent's frames, height
and width (nodes.conditioning_areas cuts it per latent dimension). The module's other classes, SVD's checkpoint
loader and conditioning, are in svd.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.inputs import require_model
from nodes.modelfns.model_options import with_function

MODULE = "comfy_extras.nodes_video_model"
CFG_FUNCTION = "sampler_cfg_function"


def _guided(args: dict, scale: torch.Tensor) -> torch.Tensor:
    """CFG on the noise estimates (ComfyUI's cfg-function arguments) with one scale per batch entry."""
    cond, uncond = args["cond"], args["uncond"]
    return uncond + scale.reshape((cond.shape[0],) + (1,) * (cond.ndim - 1)) * (cond - uncond)


@dataclass(frozen=True)
class LinearCfgFunction:
    """Scales rising evenly from min_cfg at the first entry to the sampler's cfg at the last."""

    min_cfg: float

    def __call__(self, args: dict) -> torch.Tensor:
        cond = args["cond"]
        return _guided(args, torch.linspace(self.min_cfg, args["cond_scale"], cond.shape[0], device=cond.device))


@dataclass(frozen=True)
class TriangleCfgFunction:
    """Scales rising from min_cfg at the first entry to cfg at the middle and falling back to min_cfg."""

    min_cfg: float

    def __call__(self, args: dict) -> torch.Tensor:
        cond = args["cond"]
        t = torch.linspace(0, 1, cond.shape[0], device=cond.device)
        tri = 2 * (t - torch.floor(t + 0.5)).abs()  # distance to the nearest integer, doubled: 0 -> 1 -> 0
        return _guided(args, tri * (args["cond_scale"] - self.min_cfg) + self.min_cfg)


class _VideoCfg:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "sampling/video_models"
    SHAPE: type = LinearCfgFunction

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "min_cfg": (
                    "FLOAT",
                    {
                        "default": 1.0,
                        "min": 0.0,
                        "max": 100.0,
                        "step": 0.5,
                        "round": 0.01,
                        "tooltip": "Guidance scale at the ends of the batch.",
                    },
                ),
            }
        }

    def patch(self, model: Any, min_cfg: float) -> tuple[ModelRef]:
        return (with_function(require_model(model), CFG_FUNCTION, self.SHAPE(float(min_cfg))),)


class VideoLinearCFGGuidance(_VideoCfg):
    DESCRIPTION = (
        "Guidance scale rising linearly over the batch (a video's frames) from min_cfg at the first "
        "frame to the sampler's cfg at the last."
    )
    SHAPE = LinearCfgFunction


class VideoTriangleCFGGuidance(_VideoCfg):
    DESCRIPTION = (
        "Guidance scale over the batch (a video's frames) rising from min_cfg at the first frame to "
        "the sampler's cfg in the middle and back to min_cfg at the last."
    )
    SHAPE = TriangleCfgFunction


class ConditioningSetAreaPercentageVideo:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "append"
    CATEGORY = "conditioning"
    RETURN_TYPES = ("CONDITIONING",)
    DESCRIPTION = "Limits the conditioning to a box of a video given as fractions of its frames, height and width."

    @classmethod
    def INPUT_TYPES(cls):
        def fraction(default: float, tip: str) -> tuple:
            return ("FLOAT", {"default": default, "min": 0, "max": 1.0, "step": 0.01, "tooltip": tip})

        return {
            "required": {
                "conditioning": ("CONDITIONING",),
                "width": fraction(1.0, "Width of the box as a fraction of the frame width."),
                "height": fraction(1.0, "Height of the box as a fraction of the frame height."),
                "temporal": fraction(1.0, "Length of the box as a fraction of the video's latent frames."),
                "x": fraction(0, "Left edge of the box as a fraction of the frame width."),
                "y": fraction(0, "Top edge of the box as a fraction of the frame height."),
                "z": fraction(0, "First frame of the box as a fraction of the video's latent frames."),
                "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 10.0, "step": 0.01}),
            }
        }

    def append(
        self,
        conditioning: list,
        width: float,
        height: float,
        temporal: float,
        x: float,
        y: float,
        z: float,
        strength: float,
    ) -> tuple[list]:
        conditioning = require(conditioning, "conditioning")
        return (
            set_values(
                conditioning,
                {
                    "area": ("percentage", temporal, height, width, z, y, x),
                    "strength": strength,
                    "set_area_to_bounds": False,
                },
            ),
        )


NODE_CLASS_MAPPINGS = {
    "VideoLinearCFGGuidance": VideoLinearCFGGuidance,
    "VideoTriangleCFGGuidance": VideoTriangleCFGGuidance,
    "ConditioningSetAreaPercentageVideo": ConditioningSetAreaPercentageVideo,
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
