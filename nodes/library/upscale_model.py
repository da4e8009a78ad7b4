"""ComfyUI's comfy_extras.nodes_upscale_model: load an ESRGAN-family upscale model and upscale images
with it. The loader only names the weights (a ModelRef); the upscale runs as the `upscale_image` ModelFn
on an executor, tiled there (nodes/modelfns/upscale_model.py)."""

from __future__ import annotations

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_ref
from nodes.ksampler import call_model_fn
from nodes.loaders import make_ref, model_file
from nodes.workspace import active

MODULE = "comfy_extras.nodes_upscale_model"
COMPONENT = "upscale_model"


class UpscaleModelLoader:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model_name": (
                    "COMBO",
                    {
                        "multiselect": False,
                        "options": active().list_files("upscale_models"),
                        "tooltip": "The upscale model file (ESRGAN family).",
                    },
                )
            }
        }

    RETURN_TYPES = ("UPSCALE_MODEL",)
    FUNCTION = "load_model"
    CATEGORY = "loaders"
    DESCRIPTION = "Loads an image upscale model (ESRGAN, Real-ESRGAN, BSRGAN) from models/upscale_models."
    RELATIVE_PYTHON_MODULE = MODULE

    def load_model(self, model_name: str) -> tuple[ModelRef]:
        from nodes.models.errors import ModelLoadError
        from nodes.models.esrgan import is_esrgan
        from nodes.models.safetensors_io import shapes_of

        path = model_file("upscale_models", model_name, "model_name")
        try:
            keys = shapes_of(path)[0]
        except ModelLoadError as e:
            raise ValueError(f"model_name: {e}") from e
        if not is_esrgan(keys):
            raise ValueError(
                f"model_name: {model_name!r} is not an upscale model Comfy Cluster can run "
                "(supported: ESRGAN / Real-ESRGAN / BSRGAN RRDBNet models)"
            )
        return (make_ref(COMPONENT, "esrgan", [path]),)


class ImageUpscaleWithModel:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "upscale_model": ("UPSCALE_MODEL", {"tooltip": "The upscale model."}),
                "image": ("IMAGE", {"tooltip": "The images to upscale."}),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "upscale"
    CATEGORY = "image/upscaling"
    DESCRIPTION = (
        "Upscales images with an upscale model, in overlapping 512-pixel tiles (smaller tiles "
        "when the device runs out of memory)."
    )
    RELATIVE_PYTHON_MODULE = MODULE

    async def upscale(self, upscale_model: ModelRef, image: torch.Tensor) -> tuple[torch.Tensor]:
        require_ref(upscale_model, COMPONENT, "upscale_model", "UPSCALE_MODEL")
        out = await call_model_fn("upscale_image", upscale_model, "upscale_model", {"image": image}, {})
        return (out["image"],)


NODE_CLASS_MAPPINGS = {"UpscaleModelLoader": UpscaleModelLoader, "ImageUpscaleWithModel": ImageUpscaleWithModel}
NODE_DISPLAY_NAME_MAPPINGS = {
    "UpscaleModelLoader": "Load Upscale Model",
    "ImageUpscaleWithModel": "Upscale Image (using Model)",
}
