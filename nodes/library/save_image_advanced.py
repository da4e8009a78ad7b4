"""Today's ComfyUI Save Image (Advanced) (`comfy_extras.nodes_images`, added after 0.3.64): saves the images
with a format chosen from a dynamic combo and passes them on.

Written here: 8-bit PNG (ComfyUI's prompt and workflow text chunks, as SaveImage). The format combo offers
ComfyUI's 16-bit PNG, EXR and AVIF too; choosing one of those is refused with an error that says so."""

from __future__ import annotations

import os
from typing import Any

import torch

from nodes import output_claims
from nodes.dynamic_inputs import DynamicSection, combo_inputs, dynamic_combo
from nodes.image_io import metadata_enabled, save_image_path, save_png
from nodes.workspace import active


def _combo(options: list[str], default: str, **extra: Any) -> tuple:
    return ("COMBO", {"default": default, "multiselect": False, "options": options, "advanced": True, **extra})


SAVE_MODE = dynamic_combo(
    {
        "still images": {},
        "animated": {
            "fps": ("FLOAT", {"default": 6.0, "min": 0.01, "max": 1000.0, "step": 0.01}),
            "loop_count": (
                "INT",
                {
                    "default": 0,
                    "min": 0,
                    "max": 1000,
                    "advanced": True,
                    "tooltip": "Times the animation repeats; 0 repeats for ever.",
                },
            ),
        },
    },
    display_name="save mode",
)
FORMAT = dynamic_combo(
    {
        "png": {"bit_depth": _combo(["8-bit", "16-bit"], "8-bit"), "input_color_space": _combo(["sRGB"], "sRGB")},
        "exr": {
            "bit_depth": _combo(["32-bit float"], "32-bit float"),
            "input_color_space": _combo(
                ["sRGB", "HDR", "linear"],
                "sRGB",
                tooltip="How the image's values are encoded (the file is scene-linear).",
            ),
        },
        "avif": {
            "bit_depth": _combo(["auto", "8-bit YUV420", "10-bit YUV420"], "auto"),
            "input_color_space": _combo(["sRGB", "HDR", "HDR PQ"], "sRGB"),
            "crf": (
                "INT",
                {
                    "default": 18,
                    "min": 1,
                    "max": 63,
                    "advanced": True,
                    "tooltip": "Lower is better quality and larger files.",
                },
            ),
            "save_mode": SAVE_MODE,
        },
    },
    tooltip="The file format.",
)


class SaveImageAdvanced:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_images"
    FUNCTION = "execute"
    CATEGORY = "image"
    OUTPUT_NODE = True

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": DynamicSection(
                {
                    "images": ("IMAGE", {"tooltip": "The images to save."}),
                    "filename_prefix": (
                        "STRING",
                        {
                            "default": "ComfyUI",
                            "multiline": False,
                            "tooltip": "The start of the file names; "
                            "may hold %date:yyyy-MM-dd% or %Node title.widget% tokens.",
                        },
                    ),
                    "format": FORMAT,
                }
            ),
            "hidden": {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"},
        }

    RETURN_TYPES = ("IMAGE",)
    RETURN_NAMES = ("images",)
    OUTPUT_TOOLTIPS = (None,)
    SEARCH_ALIASES = ["save", "save image", "export image", "output image", "write image"]
    DESCRIPTION = "Saves the images into the output folder in the chosen format and passes them on."

    def execute(
        self,
        images: torch.Tensor,
        filename_prefix: str,
        format: str,
        prompt: Any = None,
        extra_pnginfo: dict | None = None,
        **kwargs: Any,
    ):
        options = combo_inputs(kwargs, "format")
        bit_depth = options.get("bit_depth", "8-bit")
        if (format, bit_depth) != ("png", "8-bit"):
            raise ValueError(
                f"Save Image (Advanced): {format} {bit_depth} is not written by Comfy Cluster yet; choose png 8-bit"
            )
        base = active().output_dir
        folder, stem, counter, subfolder, _ = save_image_path(
            filename_prefix, base, images[0].shape[1], images[0].shape[0]
        )
        # a re-run after the head was killed writes over the names the dead run took (as SaveImage)
        taken = output_claims.claim(folder, stem, counter, len(images))
        if taken.folder != folder:
            subfolder = os.path.relpath(taken.folder, os.path.abspath(base))
        folder, stem, counter = taken.folder, taken.stem, taken.counter
        metadata = (prompt, extra_pnginfo) if metadata_enabled() else (None, None)
        results = []
        for batch_number, image in enumerate(images):
            # ComfyUI names these without SaveImage's trailing underscore
            file = f"{stem.replace('%batch_num%', str(batch_number))}_{counter:05}.png"
            save_png(image, os.path.join(folder, file), *metadata)
            results.append({"filename": file, "subfolder": subfolder, "type": "output"})
            counter += 1
        return {"ui": {"images": results}, "result": (images,)}


NODE_CLASS_MAPPINGS = {"SaveImageAdvanced": SaveImageAdvanced}
NODE_DISPLAY_NAME_MAPPINGS = {"SaveImageAdvanced": "Save Image (Advanced)"}
