"""Context windows (comfy_extras.nodes_context_windows, ComfyUI 0.3.6x and later): a MODEL whose evaluations during
sampling run over overlapping windows of a long latent dimension and are blended (nodes.sampling.context_windows).
WanContextWindowsManual is the same over Wan's frame axis, its lengths given in video frames."""

from __future__ import annotations

from typing import Any

from cluster.refs import ModelRef
from nodes.conditioning_ops import MAX_RESOLUTION
from nodes.inputs import require_model
from nodes.modelfns.model_options import WINDOWS
from nodes.sampling.context_windows import FUSE_METHODS, SCHEDULES, ContextWindows

_SCHEDULE = (
    "COMBO",
    {
        "tooltip": "How the windows are laid over the latent: fixed and overlapping (static), shifting "
        "each step (uniform), wrapping around (looped), or cut end to end (batched).",
        "multiselect": False,
        "options": list(SCHEDULES),
    },
)
_FUSE = (
    "COMBO",
    {
        "tooltip": "How overlapping windows' predictions are weighed where they meet.",
        "default": "pyramid",
        "multiselect": False,
        "options": list(FUSE_METHODS),
    },
)


def _inputs(length: dict, overlap: dict, dim: bool) -> dict:
    required = {
        "model": ("MODEL", {"tooltip": "The model sampled window by window."}),
        "context_length": ("INT", length),
        "context_overlap": ("INT", overlap),
        "context_schedule": _SCHEDULE,
        "context_stride": (
            "INT",
            {
                "tooltip": "How many spacings (1, 2, 4, ... frames apart) the uniform schedules lay windows at.",
                "default": 1,
                "min": 1,
            },
        ),
        "closed_loop": (
            "BOOLEAN",
            {"tooltip": "Let the looped schedule's windows wrap from the end to the start.", "default": False},
        ),
        "fuse_method": _FUSE,
    }
    if dim:
        required["dim"] = (
            "INT",
            {"tooltip": "The latent dimension cut into windows (0: the batch).", "default": 0, "min": 0, "max": 5},
        )
    required["freenoise"] = (
        "BOOLEAN",
        {
            "tooltip": "Shuffle the initial noise across windows (FreeNoise), which blends them more smoothly.",
            "default": False,
        },
    )
    return {"required": required}


def _windowed(
    model: Any,
    length: int,
    overlap: int,
    schedule: str,
    stride: int,
    closed_loop: bool,
    fuse: str,
    dim: int,
    freenoise: bool,
) -> ModelRef:
    settings = ContextWindows(
        str(schedule), str(fuse), int(length), int(overlap), int(stride), bool(closed_loop), int(dim), bool(freenoise)
    )
    return require_model(model).with_option(WINDOWS, settings)


class ContextWindowsManual:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_context_windows"
    EXPERIMENTAL = True
    FUNCTION = "execute"
    CATEGORY = "context"
    RETURN_TYPES = ("MODEL",)
    OUTPUT_TOOLTIPS = ("The model, sampled in context windows.",)
    DESCRIPTION = "Samples the model in overlapping windows along one latent dimension, blending the windows."

    @classmethod
    def INPUT_TYPES(cls):
        return _inputs(
            {"tooltip": "Frames (entries along dim) per window.", "default": 16, "min": 1},
            {"tooltip": "Frames shared by neighbouring windows.", "default": 4, "min": 0},
            dim=True,
        )

    def execute(
        self,
        model: Any,
        context_length: int,
        context_overlap: int,
        context_schedule: str,
        context_stride: int,
        closed_loop: bool,
        fuse_method: str,
        dim: int,
        freenoise: bool,
    ) -> tuple[ModelRef]:
        return (
            _windowed(
                model,
                context_length,
                context_overlap,
                context_schedule,
                context_stride,
                closed_loop,
                fuse_method,
                dim,
                freenoise,
            ),
        )


class WanContextWindowsManual:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_context_windows"
    EXPERIMENTAL = True
    FUNCTION = "execute"
    CATEGORY = "context"
    RETURN_TYPES = ("MODEL",)
    OUTPUT_TOOLTIPS = ("The model, sampled in context windows.",)
    DESCRIPTION = "Context windows over a Wan-like model's frames (latent dim 2), lengths given in video frames."

    @classmethod
    def INPUT_TYPES(cls):
        return _inputs(
            {"tooltip": "Video frames per window.", "default": 81, "min": 1, "max": MAX_RESOLUTION, "step": 4},
            {"tooltip": "Video frames shared by neighbouring windows.", "default": 30, "min": 0},
            dim=False,
        )

    def execute(
        self,
        model: Any,
        context_length: int,
        context_overlap: int,
        context_schedule: str,
        context_stride: int,
        closed_loop: bool,
        fuse_method: str,
        freenoise: bool,
    ) -> tuple[ModelRef]:
        # Wan's VAE packs 4 video frames into a latent frame after the first: 4k+1 frames are k+1 latent frames
        latent_length = max((int(context_length) - 1) // 4 + 1, 1)
        latent_overlap = max((int(context_overlap) - 1) // 4 + 1, 0)
        return (
            _windowed(
                model,
                latent_length,
                latent_overlap,
                context_schedule,
                context_stride,
                closed_loop,
                fuse_method,
                2,
                freenoise,
            ),
        )


NODE_CLASS_MAPPINGS = {"ContextWindowsManual": ContextWindowsManual, "WanContextWindowsManual": WanContextWindowsManual}
NODE_DISPLAY_NAME_MAPPINGS = {
    "ContextWindowsManual": "Context Windows (Manual)",
    "WanContextWindowsManual": "WAN Context Windows (Manual)",
}
