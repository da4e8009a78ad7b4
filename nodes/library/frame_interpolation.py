"""ComfyUI's comfy_extras.nodes_frame_interpolation (newer than 0.10.0; interfaces from the newest source):
FrameInterpolationModelLoader names a FILM or RIFE 4.2x file of models/frame_interpolation (a ModelRef, told apart
as ComfyUI's loader does), FrameInterpolate puts `multiplier - 1` frames between each pair of neighbouring frames
with it, as the `frame_interpolate` ModelFn on an executor (nodes/models/frame_interpolation.py). Checked against
ComfyUI's code by tests/models/test_frame_interpolation.py."""

from __future__ import annotations

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_ref
from nodes.ksampler import call_model_fn
from nodes.loaders import make_ref, model_file, model_files

MODULE = "comfy_extras.nodes_frame_interpolation"
COMPONENT = "frame_interpolation"
INTERP_MODEL = "INTERP_MODEL"


class FrameInterpolationModelLoader:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "model/loaders"
    DESCRIPTION = "Loads a frame interpolation model (FILM, or RIFE 4.25 / 4.26 and their variants)."
    RETURN_TYPES = (INTERP_MODEL,)

    @classmethod
    def INPUT_TYPES(cls):
        name_tip = "The model file, from the frame_interpolation models folder."
        device_tip = (
            "Where the model runs: 'default' lets the cluster place it (here every model runs on its executor)."
        )
        return {
            "required": {
                "model_name": ("COMBO", {"multiselect": False, "options": model_files(COMPONENT), "tooltip": name_tip})
            },
            "optional": {
                "device": (
                    "COMBO",
                    {
                        "multiselect": False,
                        "options": ["default", "cpu"],
                        "default": "default",
                        "advanced": True,
                        "tooltip": device_tip,
                    },
                )
            },
        }

    def execute(self, model_name: str, device: str = "default") -> tuple[ModelRef]:
        from nodes.models.errors import ModelLoadError
        from nodes.models.frame_interpolation import kind_of
        from nodes.models.safetensors_io import shapes_of

        path = model_file(COMPONENT, model_name, "model_name")
        try:
            kind = kind_of(shapes_of(path)[0])
        except ModelLoadError as e:
            raise ValueError(f"model_name: {e}") from e
        if kind is None:
            raise ValueError(f"model_name: {model_name!r} is neither a FILM nor a RIFE 4.2x frame interpolation model")
        return (make_ref(COMPONENT, kind, [path]),)


class FrameInterpolate:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "video"
    DESCRIPTION = (
        "Makes a clip smoother or slower: puts multiplier - 1 new frames, evenly spaced in time, between each pair "
        "of neighbouring frames; the given frames stay as they are."
    )
    SEARCH_ALIASES = ["rife", "film", "frame interpolation", "slow motion", "interpolate frames", "vfi"]
    RETURN_TYPES = ("IMAGE",)

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "interp_model": (INTERP_MODEL, {"tooltip": "The model from Load Frame Interpolation Model."}),
                "images": ("IMAGE", {"tooltip": "The frames, in order."}),
                "multiplier": (
                    "INT",
                    {
                        "default": 2,
                        "min": 2,
                        "max": 16,
                        "tooltip": "Frames out per frame pair in: 2 doubles the frame rate.",
                    },
                ),
            }
        }

    async def execute(self, interp_model: ModelRef, images: torch.Tensor, multiplier: int) -> tuple[torch.Tensor]:
        require_ref(interp_model, COMPONENT, "interp_model", INTERP_MODEL)
        if images.shape[0] < 2 or multiplier < 2:
            return (images,)
        params = {"multiplier": int(multiplier)}
        out = await call_model_fn("frame_interpolate", interp_model, "interp_model", {"images": images}, params)
        return (out["images"],)


NODE_CLASS_MAPPINGS = {
    "FrameInterpolationModelLoader": FrameInterpolationModelLoader,
    "FrameInterpolate": FrameInterpolate,
}
NODE_DISPLAY_NAME_MAPPINGS = {
    "FrameInterpolationModelLoader": "Load Frame Interpolation Model",
    "FrameInterpolate": "Run Frame Interpolation Model",
}
