"""ComfyUI's comfy_extras.nodes_depth_anything_3 (newer than 0.10.0; interfaces from Comfy-Org/ComfyUI's newest
source): LoadDA3Model names a file of models/geometry_estimation (a ModelRef), DA3Inference runs Depth Anything 3
on each image as the `da3_infer` ModelFn and returns a DA3_GEOMETRY (ComfyUI's dict: depth, image, mode, and sky or
confidence where the model gives them), DA3Render draws its depth (normalised by percentiles of the non-sky depth,
by its range, or raw; grey or through the turbo colour map), sky probability or confidence as an IMAGE.

The Mono and Metric variants run; the multi-view mode and the Small/Base variants (DualDPT, camera pose) are
refused by name (nodes/models/depth_anything3.py), and so is DA3GeometryToMesh (not offered). Checked against
ComfyUI's code by tests/models/test_depth_anything3.py."""

from __future__ import annotations

from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.dynamic_inputs import DynamicSection, combo_inputs, dynamic_combo
from nodes.inputs import require_ref
from nodes.ksampler import call_model_fn
from nodes.library.moge import turbo
from nodes.loaders import make_ref, model_file
from nodes.workspace import active

MODULE = "comfy_extras.nodes_depth_anything_3"
COMPONENT = "depth_anything3"
FOLDER = "geometry_estimation"
CATEGORY = "image/geometry estimation"
RESIZE_METHODS = ["upper_bound_resize", "lower_bound_resize"]

_DEPTH_OPTIONS = {
    "normalization": (
        ["v2_style", "min_max", "raw"],
        {
            "default": "v2_style",
            "tooltip": "v2_style: between the 1st and 99th percentiles of the non-sky depth, near bright, sky black.\n"
            "min_max: the whole depth range of each image, near bright.\nraw: the depth as the model gives it "
            "(metres for the Metric model), unclamped.",
        },
    ),
    "apply_sky_clip": (
        "BOOLEAN",
        {
            "default": False,
            "tooltip": "Before normalising, set the sky's depth to the 99th percentile of the rest. Needs a model "
            "with a sky output (Mono/Metric).",
        },
    ),
}
_COLORED = {"colored": ("BOOLEAN", {"default": False, "tooltip": "Draw through the turbo colour map."})}
RENDER_OUTPUT = dynamic_combo(
    {"depth": _DEPTH_OPTIONS, "depth_colored": _DEPTH_OPTIONS, "sky_mask": _COLORED, "confidence": _COLORED},
    tooltip="depth: normalised grey depth. depth_colored: the same through the turbo colour map. sky_mask: the sky "
    "probability (Mono/Metric models). confidence: the normalised depth confidence (Small/Base models).",
)
MODE = dynamic_combo(
    {
        "mono": {},
        "multiview": {
            "ref_view_strategy": (["saddle_balanced", "saddle_sim_range", "first", "middle"],),
            "pose_method": (["cam_dec", "ray_pose"],),
        },
    },
    tooltip="mono: every image on its own (any model). multiview: the images as views of one scene, with camera "
    "poses (Small/Base models; not supported here yet).",
)


class LoadDA3Model:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "model/loaders"
    RETURN_TYPES = ("DA3_MODEL",)
    DESCRIPTION = "Loads a Depth Anything 3 model (Mono or Metric) from models/geometry_estimation."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model_name": (active().list_files(FOLDER),),
                "weight_dtype": (["default", "fp16", "bf16", "fp32"], {"default": "default"}),
            }
        }

    def execute(self, model_name: str, weight_dtype: str = "default") -> tuple[ModelRef]:
        from nodes.models.depth_anything3 import is_depth_anything3, unsupported_variant
        from nodes.models.errors import ModelLoadError
        from nodes.models.safetensors_io import shapes_of

        # weight_dtype is accepted for the graph's sake: the model runs in float32 here (as ComfyUI on a CPU)
        path = model_file(FOLDER, model_name, "model_name")
        try:
            keys = [k.removeprefix("model.diffusion_model.") for k in shapes_of(path)[0]]
        except ModelLoadError as e:
            raise ValueError(f"model_name: {e}") from e
        if not is_depth_anything3(keys):
            raise ValueError(f"model_name: {model_name!r} is not a Depth Anything 3 model")
        why = unsupported_variant(keys)
        if why:
            raise ValueError(f"model_name: {model_name!r} is {why}, which is not supported yet (Mono/Metric are)")
        return (make_ref(COMPONENT, "mono", [path]),)


class DA3Inference:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = CATEGORY
    RETURN_TYPES = ("DA3_GEOMETRY",)
    RETURN_NAMES = ("da3_geometry",)
    DESCRIPTION = "Estimates the depth (and the sky) of each image with Depth Anything 3."
    SEARCH_ALIASES = ["depth", "geometry", "da3", "depth anything", "monocular", "sky", "metric depth"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": DynamicSection(
                {
                    "da3_model": ("DA3_MODEL",),
                    "image": ("IMAGE",),
                    "resolution": (
                        "INT",
                        {
                            "default": 504,
                            "min": 140,
                            "max": 2520,
                            "step": 14,
                            "tooltip": "The size the model sees (a multiple of 14): lower is faster, higher more "
                            "detailed; the result is resized back to the image's size.",
                        },
                    ),
                    "resize_method": (
                        RESIZE_METHODS,
                        {
                            "default": "upper_bound_resize",
                            "tooltip": "upper_bound_resize: the longest side becomes the resolution. "
                            "lower_bound_resize: the shortest side does (more detail, more memory).",
                        },
                    ),
                    "mode": MODE,
                }
            )
        }

    async def execute(
        self, da3_model: ModelRef, image: torch.Tensor, resolution: int, resize_method: str, mode: str, **kwargs: Any
    ):
        require_ref(da3_model, COMPONENT, "da3_model", "DA3_MODEL")
        if mode != "mono":
            raise ValueError(f"mode: {mode!r} (cross-view geometry and camera poses) is not supported yet; use mono")
        if resize_method not in RESIZE_METHODS:
            raise ValueError(f"resize_method: unknown {resize_method!r}")
        image = image[..., :3]
        params = {"resolution": int(resolution), "resize_method": resize_method}
        out = await call_model_fn("da3_infer", da3_model, "da3_model", {"image": image.contiguous()}, params)
        geometry: dict[str, Any] = {"depth": out["depth"].contiguous(), "image": image.cpu(), "mode": "mono"}
        for name in ("sky", "confidence"):
            if name in out:
                geometry[name] = out[name].contiguous()
        return (geometry,)


class DA3Render:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = CATEGORY
    RETURN_TYPES = ("IMAGE",)
    DESCRIPTION = "Draws a Depth Anything 3 geometry's depth, sky mask or confidence as an image."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": DynamicSection({"da3_geometry": ("DA3_GEOMETRY",), "output": RENDER_OUTPUT})}

    def execute(self, da3_geometry: dict, output: str, **kwargs: Any):
        from nodes.models import depth_anything3 as da3

        if not isinstance(da3_geometry, dict) or "depth" not in da3_geometry:
            raise ValueError("da3_geometry: expected the DA3_GEOMETRY of Run Depth Anything 3")
        options = combo_inputs(kwargs, "output")
        if output in ("depth", "depth_colored"):
            normalization = options.get("normalization", "v2_style")
            clip = bool(options.get("apply_sky_clip", False))
            sky = da3_geometry.get("sky")
            if clip and sky is None:
                raise ValueError("output.apply_sky_clip: the geometry has no sky (Mono/Metric models have one)")
            depth = da3_geometry["depth"].float()
            if clip:
                depth = torch.stack([da3.sky_clip(d, s) for d, s in zip(depth, sky)])
            if normalization == "v2_style":
                grey = torch.stack([da3.v2_normalized(d, None if sky is None else sky[i]) for i, d in enumerate(depth)])
            elif normalization == "min_max":
                grey = da3.min_max_normalized(depth)
            elif normalization == "raw":
                grey = depth
            else:
                raise ValueError(f"output.normalization: unknown {normalization!r}")
            if normalization != "raw":
                grey = grey.clamp(0.0, 1.0)
            image = turbo(grey) if output == "depth_colored" else grey.unsqueeze(-1).expand(*grey.shape, 3)
        elif output in ("sky_mask", "confidence"):
            field = "sky" if output == "sky_mask" else "confidence"
            if field not in da3_geometry:
                which = "Mono/Metric" if field == "sky" else "Small/Base"
                raise ValueError(f"da3_geometry: it has no {field} ({which} models give one)")
            values = da3_geometry[field].float()
            if field == "confidence":
                values = da3.confidence_normalized(values)
            image = turbo(values) if options.get("colored", False) else values.unsqueeze(-1).expand(*values.shape, 3)
        else:
            raise ValueError(f"output: unknown {output!r} (depth, depth_colored, sky_mask or confidence)")
        return (image.contiguous().float(),)


NODE_CLASS_MAPPINGS = {"LoadDA3Model": LoadDA3Model, "DA3Inference": DA3Inference, "DA3Render": DA3Render}
NODE_DISPLAY_NAME_MAPPINGS = {
    "LoadDA3Model": "Load Depth Anything 3",
    "DA3Inference": "Run Depth Anything 3",
    "DA3Render": "Render Depth Anything 3",
}
