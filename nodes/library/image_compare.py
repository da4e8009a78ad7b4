"""Today's ComfyUI Image Compare (`comfy_extras.nodes_image_compare`, added after 0.3.64): an output node that
writes its two inputs as previews; the web UI shows them with a slider between them."""

from __future__ import annotations

import torch

from nodes.image_io import PreviewImage


class ImageCompare:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_image_compare"
    FUNCTION = "execute"
    CATEGORY = "image"
    OUTPUT_NODE = True
    EXPERIMENTAL = True

    @classmethod
    def INPUT_TYPES(cls):
        # compare_view is the web UI's slider widget: it has no socket and sends nothing the node uses
        return {
            "required": {"compare_view": ("IMAGECOMPARE", {"socketless": True})},
            "optional": {"image_a": ("IMAGE", {}), "image_b": ("IMAGE", {})},
            "hidden": {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"},
        }

    RETURN_TYPES = ()
    OUTPUT_TOOLTIPS = ()
    DESCRIPTION = "Shows image_a and image_b one over the other with a slider to compare them."

    def execute(
        self,
        compare_view: object = None,
        image_a: torch.Tensor | None = None,
        image_b: torch.Tensor | None = None,
        prompt: object = None,
        extra_pnginfo: dict | None = None,
    ):
        ui = {"a_images": [], "b_images": []}
        for key, images, prefix in (("a_images", image_a, "comfy.compare.a"), ("b_images", image_b, "comfy.compare.b")):
            if images is not None and len(images) > 0:
                ui[key] = PreviewImage().save_images(images, prefix, prompt, extra_pnginfo)["ui"]["images"]
        return {"ui": ui}


NODE_CLASS_MAPPINGS = {"ImageCompare": ImageCompare}
NODE_DISPLAY_NAME_MAPPINGS = {"ImageCompare": "Image Compare"}
