"""ComfyUI's comfy_extras.nodes_mage: TextEncodeMageFlowEdit, the prompt encoder of Mage-Flow's text-to-image and
edit templates (the newest ComfyUI source; interface as it declares it).

It encodes the prompt and the negative prompt (a space when empty) with Mage-Flow's Qwen3-VL text encoder, both
reading the same reference images (the `images` group, image_1..image_16, in name order): each is seen by the
vision tower with its long edge shrunk to 384 pixels (bicubic, sides rounded, only when longer) and, given a VAE,
encoded at the output size (bicubic when it differs) as a reference latent of both conditionings. The output size
is width x height, or where either is 0 that side of the first image (1024 without images), floored to multiples
of 16 and at least 16; the latent is the empty 128-channel latent at 1/16 of it, batch_size deep."""

from __future__ import annotations

import torch

from nodes.dynamic_inputs import DynamicSection, autogrow_names, group
from nodes.inputs import require_component
from nodes.ksampler import call_model_fn
from nodes.modelfns.hooks import encodings
from nodes.upscale import common_upscale

MODULE = "comfy_extras.nodes_mage"
PROMPT = ("STRING", {"multiline": True, "dynamicPrompts": True})
IMAGES = autogrow_names(
    "image",
    ("IMAGE", {}),
    [f"image_{i}" for i in range(1, 17)],
    0,
)
VL_EDGE = 384  # the vision tower's copy: long edge at most this many pixels (Mage's training preprocessing)
DEFAULT_SIZE = 1024
SIZE_TOOLTIP = "Output {}. 0 = use the first reference image's size."


def output_size(width: int, height: int, first: torch.Tensor | None) -> tuple[int, int]:
    """(width, height) of the output: each side given, or the first image's (1024 without one) where 0,
    floored to a multiple of 16, at least 16."""
    if width == 0 or height == 0:
        ref_h, ref_w = (first.shape[1], first.shape[2]) if first is not None else (DEFAULT_SIZE, DEFAULT_SIZE)
        height, width = height or ref_h, width or ref_w
    return max(16, width // 16 * 16), max(16, height // 16 * 16)


def vision_copy(image: torch.Tensor) -> torch.Tensor:
    """The picture the vision tower reads: the long edge shrunk to VL_EDGE pixels when longer (bicubic)."""
    h, w = image.shape[1], image.shape[2]
    if max(h, w) <= VL_EDGE:
        return image
    scale = VL_EDGE / max(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return common_upscale(image.movedim(-1, 1), *size, "bicubic", "disabled").movedim(1, -1)


async def _encode(clip, text: str, images: list[torch.Tensor], references: list[torch.Tensor]) -> list:
    inputs = {f"image{i}": image for i, image in enumerate(images)}
    params = {"text": text, "images": len(images)}
    conditioning = []
    for ref, extra in encodings(clip):
        out = await call_model_fn("text_encode", ref, "clip", inputs, params)
        opts = {"pooled_output": out.get("pooled"), **extra}
        if references:
            opts["reference_latents"] = list(references)
        conditioning.append([out["cond"], opts])
    return conditioning


class TextEncodeMageFlowEdit:
    @classmethod
    def INPUT_TYPES(cls):
        images = (
            IMAGES[0],
            {
                **IMAGES[1],
                "tooltip": "Reference image(s) to edit. All references are resized to the output resolution "
                "before encoding.",
            },
        )
        size = {"default": 0, "min": 0, "max": 8192, "step": 16}
        return {
            "required": DynamicSection(
                {
                    "clip": ("CLIP", {}),
                    "prompt": PROMPT,
                    "negative_prompt": (PROMPT[0], {**PROMPT[1], "advanced": True}),
                    "images": images,
                    "width": ("INT", {**size, "tooltip": SIZE_TOOLTIP.format("width")}),
                    "height": ("INT", {**size, "tooltip": SIZE_TOOLTIP.format("height")}),
                    "batch_size": ("INT", {"default": 1, "min": 1, "max": 4096}),
                }
            ),
            "optional": {"vae": ("VAE", {})},
        }

    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    FUNCTION = "execute"
    CATEGORY = "model/conditioning/mage"
    DESCRIPTION = (
        "Encode an edit instruction with one or more reference images for Mage-Flow-Edit. Reference latents are "
        "resized to the output resolution (width/height, or the first image's size when 0). Use the latent "
        "output for sampling so the sizes always match."
    )
    RELATIVE_PYTHON_MODULE = MODULE

    async def execute(
        self, clip, prompt: str, negative_prompt: str = "", vae=None, width=0, height=0, batch_size=1, **kwargs
    ):
        clip = require_component(clip, "text_encoder", "clip")
        if clip.arch != "mage_flow":
            raise ValueError(
                f"clip: TextEncodeMageFlowEdit needs Mage-Flow's Qwen3-VL text encoder (CLIPLoader type mage), "
                f"got a {clip.arch} CLIP"
            )
        for name, text in (("prompt", prompt), ("negative_prompt", negative_prompt)):
            if not isinstance(text, str):
                raise ValueError(f"{name}: expected a STRING, got {type(text).__name__}")
        for name, value, low in (("width", width, 0), ("height", height, 0), ("batch_size", batch_size, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= (8192, 4096)[low]:
                raise ValueError(f"{name}: {value!r} is not an integer in {low}..{(8192, 4096)[low]}")
        images = []
        for name, image in group(kwargs, "images", IMAGES).items():
            if image is None:
                continue
            if not isinstance(image, torch.Tensor) or image.ndim != 4 or min(image.shape[1:3]) < 1:
                raise ValueError(f"images.{name}: expected an IMAGE [B,H,W,C]")
            images.append(image)
        width, height = output_size(width, height, images[0] if images else None)
        references = []
        if vae is not None:
            vae_ref = require_component(vae, "vae", "vae")
            for image in images:
                pixels = image
                if (image.shape[2], image.shape[1]) != (width, height):
                    pixels = common_upscale(image.movedim(-1, 1), width, height, "bicubic", "disabled").movedim(1, -1)
                out = await call_model_fn("vae_encode", vae_ref, "vae", {"pixels": pixels[..., :3]}, {})
                references.append(out["latent"])
        seen = [vision_copy(image) for image in images]
        positive = await _encode(clip, prompt, seen, references)
        negative = await _encode(clip, negative_prompt or " ", seen, references)
        latent = torch.zeros([batch_size, 128, height // 16, width // 16])
        return (positive, negative, {"samples": latent})


NODE_CLASS_MAPPINGS = {"TextEncodeMageFlowEdit": TextEncodeMageFlowEdit}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
