"""Today's FLUX 3 template nodes. The newest ComfyUI source of these classes was not readable here (the code index
holds no file declaring them); their interfaces follow what is published about them: the web UI's FLUX 3
templates (comfyui-workflow-templates-json 0.1.123: widget names, order and values, socket names and types) and
their documentation in comfyui-embedded-docs 0.5.15 (inputs, outputs, defaults, ranges). What neither gives
(category, Python module) is chosen here and listed in docs/nodes.md.

Flux3LayoutPrompt appends Create Bounding Boxes' elements to the prompt as the box table FLUX 3 reads: the form
BFL's reference code gives the model (diffusers 0.42's flux3 prompt_upsampler, adapted from BFL's bbox.py): the
caption, a space, and a JSON list of {"id": "obj_N", "bbox": [y_min, x_min, y_max, x_max] on a 0-1000 canvas,
"desc": ...}, cited in the prompt as <obj_N>. A text element's text leads its description in double quotes (the
form FLUX 3's captions give rendered text); palettes are dropped, as the documentation says. No elements: the
prompt comes back unchanged.

ReferenceMultiLatent (Set Reference Multi Latent) VAE-encodes each linked image (`images.image0`, `image1`, ...
in slot order), at its own size or, with `resolution` "resize", scaled to `megapixels` (aspect kept, sides
rounded, area resampling as ImageScaleToTotalPixels), each centre-cropped to the VAE's cell, and appends the
latents to the positive conditioning's reference latents and to the negative's (the negative output is the new
positive when no negative is linked). Its `empty_latent` is the first reference's latent times 0; without a VAE
or an image the conditionings pass unchanged and it is a square empty FLUX.2 latent (128 channels at 1/16) of
1024x1024 pixels, or of `megapixels` when resizing."""

from __future__ import annotations

import json
import math
import numbers
from typing import Any

import torch

from nodes.conditioning import require
from nodes.dynamic_inputs import DynamicSection, autogrow_prefix, combo_inputs, dynamic_combo, group
from nodes.inputs import require_component
from nodes.ksampler import SPATIAL_DOWNSCALE, call_model_fn
from nodes.model_nodes import crop_to_multiple
from nodes.upscale import common_upscale

CANVAS = 1000


def _row(index: int, element: Any) -> dict[str, Any]:
    where = f"element: item {index}"
    if not isinstance(element, dict):
        raise ValueError(f"{where} is {type(element).__name__}, expected an element of Create Bounding Boxes")
    box = element.get("bbox")
    if (
        not isinstance(box, (list, tuple))
        or len(box) != 4
        or not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in box)
    ):
        raise ValueError(f"{where} has no bbox [y_min, x_min, y_max, x_max] on the 0-{CANVAS} grid: {box!r}")
    desc = str(element.get("desc") or "").strip()
    text = element.get("text")
    if element.get("type") == "text" and text:
        desc = f'"{text}"' + (f", {desc}" if desc else "")
    return {"id": f"obj_{index + 1}", "bbox": [int(round(max(0, min(CANVAS, v)))) for v in box], "desc": desc}


def layout_prompt(prompt: str, elements: Any) -> str:
    """`prompt` with the elements' box table appended (unchanged when there are none)."""
    if elements is None:
        elements = []
    if not isinstance(elements, (list, tuple)):
        raise ValueError(
            f"element: expected the ARRAY of Create Bounding Boxes' elements, got {type(elements).__name__}"
        )
    if not elements:
        return prompt
    rows = [_row(i, e) for i, e in enumerate(elements)]
    return f"{prompt.strip()} {json.dumps(rows, ensure_ascii=False)}"


class Flux3LayoutPrompt:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_flux"
    FUNCTION = "execute"
    CATEGORY = "advanced/conditioning/flux"
    DESCRIPTION = (
        "Appends the elements drawn in Create Bounding Boxes to the prompt as FLUX 3's box table (id, box, "
        "description); cite box N as <obj_N>."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "prompt": (
                    "STRING",
                    {"multiline": True, "tooltip": "What to draw; <obj_N> in it names the N-th element's box."},
                ),
                "element": (
                    "ARRAY",
                    {
                        "tooltip": "Create Bounding Boxes' elements; their palettes are dropped (name colors in the text)."
                    },
                ),
            }
        }

    RETURN_TYPES = ("STRING",)
    RETURN_NAMES = ("prompt",)

    def execute(self, prompt: str, element: Any) -> tuple[str]:
        return (layout_prompt(prompt, element),)


KEEP, RESIZE = "keep resolution", "resize"
MAX_IMAGES = 100
MEGAPIXELS = ("FLOAT", {"default": 1.0, "min": 0.01, "max": 16.0, "step": 0.01})
RESOLUTION = dynamic_combo({KEEP: {}, RESIZE: {"megapixels": MEGAPIXELS}})
IMAGES = autogrow_prefix("image", ("IMAGE", {}), prefix="image", minimum=1, maximum=MAX_IMAGES, optional_items=True)
EMPTY_SIDE = 1024  # the empty latent's side without references, at "keep resolution"


def _scaled(image: torch.Tensor, megapixels: float) -> torch.Tensor:
    h, w = image.shape[1], image.shape[2]
    scale = math.sqrt(megapixels * 1024 * 1024 / (w * h))
    width, height = max(1, round(w * scale)), max(1, round(h * scale))
    return common_upscale(image.movedim(-1, 1), width, height, "area", "disabled").movedim(1, -1)


def _with_references(conditioning: list, latents: list[torch.Tensor]) -> list:
    return [
        [cond, {**opts, "reference_latents": list(opts.get("reference_latents") or []) + latents}]
        for cond, opts in conditioning
    ]


class ReferenceMultiLatent:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_edit_model"
    FUNCTION = "execute"
    CATEGORY = "advanced/conditioning/edit_models"
    DESCRIPTION = "Encodes reference images with the VAE and appends their latents to the conditionings."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": DynamicSection({"positive": ("CONDITIONING", {}), "resolution": RESOLUTION}),
            "optional": DynamicSection({"negative": ("CONDITIONING", {}), "vae": ("VAE", {}), "images": IMAGES}),
        }

    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "empty_latent")

    async def execute(self, positive: list, resolution: str = KEEP, negative: list | None = None, vae=None, **kwargs):
        positive = require(positive, "positive")
        if negative is not None:
            negative = require(negative, "negative")
        if resolution not in (KEEP, RESIZE):
            raise ValueError(f"resolution: {resolution!r} is not one of {KEEP!r}, {RESIZE!r}")
        megapixels = float(combo_inputs(kwargs, "resolution").get("megapixels", 1.0)) if resolution == RESIZE else None
        images = [v for v in group(kwargs, "images", IMAGES).values() if v is not None]
        latents = []
        if vae is not None:
            vae = require_component(vae, "vae", "vae")
            cell = SPATIAL_DOWNSCALE.get(vae.arch, 8)
            for i, image in enumerate(images):
                if not isinstance(image, torch.Tensor) or image.ndim != 4:
                    raise ValueError(f"images: image{i} is not an IMAGE [B,H,W,C]")
                pixels = _scaled(image, megapixels) if megapixels is not None else image
                out = await call_model_fn(
                    "vae_encode", vae, "vae", {"pixels": crop_to_multiple(pixels[..., :3], cell)}, {}
                )
                latents.append(out["latent"])
        if not latents:
            side = EMPTY_SIDE if megapixels is None else round(math.sqrt(megapixels) * 1024)
            empty = torch.zeros(1, 128, side // 16, side // 16)
            return (positive, negative if negative is not None else positive, {"samples": empty})
        positive = _with_references(positive, latents)
        negative = _with_references(negative, latents) if negative is not None else positive
        return (positive, negative, {"samples": latents[0] * 0.0})


NODE_CLASS_MAPPINGS = {"Flux3LayoutPrompt": Flux3LayoutPrompt, "ReferenceMultiLatent": ReferenceMultiLatent}
NODE_DISPLAY_NAME_MAPPINGS = {
    "Flux3LayoutPrompt": "FLUX 3 Image Layout Prompt",
    "ReferenceMultiLatent": "Set Reference Multi Latent",
}
