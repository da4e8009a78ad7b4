"""ComfyUI's comfy_extras.nodes_qwen: the Qwen-Image-Edit prompt encoders. The images go through the text
encoder's Qwen2.5-VL vision tower (nodes.models.qwen_vl) inside the prompt, and, given a VAE, into the
conditioning as reference latents (ReferenceLatent's `reference_latents`, read by nodes.models.qwen_image).

As ComfyUI 0.3.64 sizes them (`area` resampling, aspect ratio kept, from the image's own size):
- TextEncodeQwenImageEdit: one image, at about 1024x1024 pixels for both the vision tower and the VAE
  (rounded to whole pixels); with an image and no template of the prompt's own, Qwen's edit prompt with the
  image before the text;
- TextEncodeQwenImageEditPlus: up to three, each at about 384x384 pixels for the vision tower and at about
  1024x1024 rounded to multiples of 8 for the VAE, announced in the prompt as "Picture N: " slots ahead of the
  text (N counts the inputs, so a missing image1 leaves the first picture number 2); its own edit template
  even with no image. Only an image's first three channels are read (as the newest ComfyUI does).

TextEncodeQwenImage21 (newest ComfyUI source) encodes the prompt and the negative prompt with Qwen-Image 2.1's
Qwen3-VL text encoder (nodes.models.qwen_image21_text), both reading the same reference images (up to 16, the
first picture of each input): each is resized (lanczos, aspect kept) to about resolution x resolution pixels with
sides at multiples of 32 (resolution 0: its own size rounded to 32), seen by the vision tower with any alpha laid
over white, and, given a VAE, encoded with all its channels as a reference latent; then the image tokens leave the
conditioning and `image_slots` say where the latents go. Without a VAE the image tokens stay. The empty 64-channel
latent at 1/16 scale has the first reference's size, else resolution x resolution pixels (1024 when 0).

QwenImage21Cache (newest ComfyUI source) sets where and how Qwen-Image 2.1 keeps the text and reference keys and
values between steps. Here every step recomputes them (ComfyUI's "off"), which gives the same numbers as
ComfyUI's lossless "default"; its int8/int4 storage is not emulated, so with those ComfyUI's result differs from
this one by its quantisation error. The model passes through unchanged."""

from __future__ import annotations

import math

import torch

from nodes.dynamic_inputs import DynamicSection, autogrow_names, group
from nodes.inputs import require_component, require_model
from nodes.ksampler import call_model_fn
from nodes.model_nodes import VAEEncode
from nodes.modelfns.hooks import encodings
from nodes.models.qwen_image_text import TEMPLATE_EDIT
from nodes.upscale import common_upscale

MODULE = "comfy_extras.nodes_qwen"
PROMPT = ("STRING", {"multiline": True, "dynamicPrompts": True})
VISION_SLOT = "Picture {}: <|vision_start|><|image_pad|><|vision_end|>"
EDIT_ENCODERS = ("qwen_image", "krea2")


def _image(image, name: str) -> torch.Tensor:
    if not isinstance(image, torch.Tensor) or image.ndim != 4 or image.shape[1] < 1 or image.shape[2] < 1:
        raise ValueError(f"{name}: expected an IMAGE [B,H,W,C]")
    return image


def resized(image: torch.Tensor, pixels: int, multiple: float | None = None) -> torch.Tensor:
    """`image` (area) at about `pixels` pixels, aspect kept; sides rounded to whole pixels, or to `multiple`s."""
    h, w = image.shape[1], image.shape[2]
    scale = math.sqrt(pixels / (w * h))
    if multiple is None:
        width, height = round(w * scale), round(h * scale)
    else:
        width, height = round(w * scale / multiple) * multiple, round(h * scale / multiple) * multiple
    return common_upscale(image.movedim(-1, 1), int(width), int(height), "area", "disabled").movedim(1, -1)


async def encode_with_images(
    clip, prompt: str, images: list[torch.Tensor], template: str | None, references: list[torch.Tensor]
) -> list:
    """CONDITIONING of `prompt` read with `images` by the text encoder, `references` added as reference
    latents (after any the entry has)."""
    clip = require_component(clip, "text_encoder", "clip")
    if clip.arch not in EDIT_ENCODERS:  # Krea 2's Qwen3-VL reads the pictures too (its style-reference LoRA)
        raise ValueError(
            f"clip: the Qwen-Image-Edit encoders need Qwen-Image's text encoder (CLIPLoader type "
            f"qwen_image) or Krea 2's (type krea2), got a {clip.arch} CLIP"
        )
    inputs = {f"image{i}": img for i, img in enumerate(images)}
    params = {"text": prompt, "images": len(images), "template": template}
    conditioning = []
    for ref, extra in encodings(clip):
        out = await call_model_fn("text_encode", ref, "clip", inputs, params)
        opts = {"pooled_output": out.get("pooled"), **extra}
        if references:
            opts["reference_latents"] = list(references)
        conditioning.append([out["cond"], opts])
    return conditioning


class TextEncodeQwenImageEdit:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"clip": ("CLIP", {}), "prompt": PROMPT},
            "optional": {"vae": ("VAE", {}), "image": ("IMAGE", {})},
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "execute"
    CATEGORY = "advanced/conditioning"
    DESCRIPTION = (
        "Encodes an edit instruction for Qwen-Image-Edit: the image (at about one megapixel) is read by "
        "the text encoder's vision tower and, given a VAE, added as a reference latent."
    )
    RELATIVE_PYTHON_MODULE = MODULE

    async def execute(self, clip, prompt: str, vae=None, image=None):
        images, references = [], []
        if image is not None:
            image = resized(_image(image, "image"), 1024 * 1024)[:, :, :, :3]
            images.append(image)
            if vae is not None:
                (latent,) = await VAEEncode().encode(vae, image)
                references.append(latent["samples"])
        return (await encode_with_images(clip, prompt, images, None, references),)


class TextEncodeQwenImageEditPlus:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"clip": ("CLIP", {}), "prompt": PROMPT},
            "optional": {"vae": ("VAE", {}), "image1": ("IMAGE", {}), "image2": ("IMAGE", {}), "image3": ("IMAGE", {})},
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "execute"
    CATEGORY = "advanced/conditioning"
    DESCRIPTION = (
        "Encodes an edit instruction for Qwen-Image-Edit 2509/2511 with up to three images: each is read "
        "by the text encoder's vision tower (at about 384x384) and, given a VAE, added as a reference "
        "latent (at about one megapixel)."
    )
    RELATIVE_PYTHON_MODULE = MODULE

    async def execute(self, clip, prompt: str, vae=None, image1=None, image2=None, image3=None):
        images, references, slots = [], [], ""
        for i, image in enumerate((image1, image2, image3), start=1):
            if image is None:
                continue
            image = _image(image, f"image{i}")
            images.append(resized(image, 384 * 384)[:, :, :, :3])
            if vae is not None:
                (latent,) = await VAEEncode().encode(vae, resized(image, 1024 * 1024, 8.0)[:, :, :, :3])
                references.append(latent["samples"])
            slots += VISION_SLOT.format(i)
        return (await encode_with_images(clip, slots + prompt, images, TEMPLATE_EDIT, references),)


IMAGES_21 = autogrow_names("image", ("IMAGE", {}), [f"image_{i}" for i in range(1, 17)], 0)
RESOLUTION_TOOLTIP = (
    "Pixel area (side x side) each reference image is scaled to, aspect kept, sides multiples of "
    "32; 0 leaves references at their own size rounded to 32. Also the empty latent's side."
)
LATENT_TOOLTIP = "The empty latent to sample: the first reference image's size, else resolution x resolution."


def reference_size(height: int, width: int, resolution: int) -> tuple[int, int]:
    """(height, width) TextEncodeQwenImage21 gives a reference image: about resolution x resolution pixels, aspect
    kept, or with resolution 0 its own size; sides rounded to multiples of 32, at least 32."""
    if resolution > 0:
        ratio = width / height
        w = round(math.sqrt(resolution * resolution * ratio) / 32) * 32
        h = round(math.sqrt(resolution * resolution / ratio) / 32) * 32
    else:
        w, h = round(width / 32) * 32, round(height / 32) * 32
    return max(32, h), max(32, w)


async def encode_text(
    clip, prompt: str, images: list[torch.Tensor] = (), keep_vision: bool = True, references: list = ()
) -> list:
    """CONDITIONING of `prompt` with Qwen-Image 2.1's encoder reading `images`; with `keep_vision` off the image
    tokens are left out and their slots recorded, and `references` are added as reference latents."""
    inputs = {f"image{i}": image for i, image in enumerate(images)}
    params = {"text": prompt, "images": len(images), "keep_vision": keep_vision}
    conditioning = []
    for ref, extra in encodings(clip):
        out = await call_model_fn("text_encode", ref, "clip", inputs, params)
        opts = {"pooled_output": out.get("pooled"), **extra}
        if out.get("image_slots") is not None:
            opts["image_slots"] = [int(s) for s in out["image_slots"].tolist()]
        if references:
            opts["reference_latents"] = list(references)
        conditioning.append([out["cond"], opts])
    return conditioning


class TextEncodeQwenImage21:
    @classmethod
    def INPUT_TYPES(cls):
        images = (
            IMAGES_21[0],
            {
                **IMAGES_21[1],
                "tooltip": "Up to 16 reference images: read by the text "
                "encoder and, given a VAE, spliced into the sequence as latents.",
            },
        )
        return {
            "required": DynamicSection(
                {
                    "clip": ("CLIP", {}),
                    "prompt": PROMPT,
                    "negative_prompt": PROMPT,
                    "resolution": (
                        "INT",
                        {"default": 1024, "min": 0, "max": 4096, "step": 32, "tooltip": RESOLUTION_TOOLTIP},
                    ),
                    "images": images,
                }
            ),
            "optional": {"vae": ("VAE", {})},
        }

    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    OUTPUT_TOOLTIPS = (None, None, LATENT_TOOLTIP)
    FUNCTION = "execute"
    CATEGORY = "model/conditioning/qwen image"
    DESCRIPTION = (
        "Encodes the prompt and the negative prompt for Qwen-Image 2.1 with up to 16 reference images (read by "
        "the text encoder's vision tower and, given a VAE, added as reference latents) and gives the empty latent "
        "to sample: the first reference's size, else resolution x resolution pixels."
    )
    RELATIVE_PYTHON_MODULE = MODULE

    async def execute(self, clip, prompt: str, negative_prompt: str, resolution: int = 1024, vae=None, **kwargs):
        clip = require_component(clip, "text_encoder", "clip")
        if clip.arch != "qwen_image21":
            raise ValueError(
                f"clip: TextEncodeQwenImage21 needs Qwen-Image 2.1's Qwen3-VL text encoder (CLIPLoader "
                f"type qwen_image), got a {clip.arch} CLIP"
            )
        for name, text in (("prompt", prompt), ("negative_prompt", negative_prompt)):
            if not isinstance(text, str):
                raise ValueError(f"{name}: expected a STRING, got {type(text).__name__}")
        resolution = int(resolution)
        if not 0 <= resolution <= 4096:
            raise ValueError(f"resolution: {resolution} is outside 0..4096")
        latent_w = latent_h = resolution or 1024
        seen, references = [], []
        for name, image in group(kwargs, "images", IMAGES_21).items():
            if image is None:
                continue
            image = _image(image, name)[:1]  # one picture per input
            height, width = reference_size(image.shape[1], image.shape[2], resolution)
            if (height, width) != tuple(image.shape[1:3]):
                image = common_upscale(image.movedim(-1, 1), width, height, "lanczos", "disabled").movedim(1, -1)
            if not seen:
                latent_w, latent_h = width, height
            rgb = image[:, :, :, :3]
            if image.shape[-1] > 3:  # the vision tower sees alpha over white; the VAE reads every channel
                rgb = rgb * image[:, :, :, 3:] + (1.0 - image[:, :, :, 3:])
            seen.append(rgb)
            if vae is not None:
                vae_ref = require_component(vae, "vae", "vae")
                out = await call_model_fn("vae_encode", vae_ref, "vae", {"pixels": image}, {})
                references.append(out["latent"])
        keep = not references
        positive = await encode_text(clip, prompt, seen, keep, references)
        negative = await encode_text(clip, negative_prompt, seen, keep, references)
        latent = torch.zeros([1, 64, latent_h // 16, latent_w // 16])
        return (positive, negative, {"samples": latent})


CACHE_DEVICES = ["auto", "gpu", "cpu", "off"]
CACHE_DTYPES = ["default", "int8", "int4"]


class QwenImage21Cache:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "device": (
                    "COMBO",
                    {
                        "options": CACHE_DEVICES,
                        "default": "auto",
                        "multiselect": False,
                        "tooltip": "Where ComfyUI keeps the cache; every step "
                        "recomputes the text and reference keys here, as ComfyUI's off does.",
                    },
                ),
                "dtype": (
                    "COMBO",
                    {
                        "options": CACHE_DTYPES,
                        "default": "default",
                        "multiselect": False,
                        "tooltip": "ComfyUI's cache storage precision; the "
                        "keys are never stored here, so every choice computes as default does.",
                    },
                ),
            }
        }

    RETURN_TYPES = ("MODEL",)
    FUNCTION = "execute"
    CATEGORY = "model/conditioning/qwen image"
    EXPERIMENTAL = True
    DESCRIPTION = (
        "Sets Qwen-Image 2.1's key/value cache device and quantization in ComfyUI. This backend "
        "recomputes the cached prefix every step, so the model passes through unchanged."
    )
    RELATIVE_PYTHON_MODULE = MODULE

    def execute(self, model, device: str, dtype: str):
        model = require_model(model)
        if device not in CACHE_DEVICES:
            raise ValueError(f"device: {device!r} is not one of {', '.join(CACHE_DEVICES)}")
        if dtype not in CACHE_DTYPES:
            raise ValueError(f"dtype: {dtype!r} is not one of {', '.join(CACHE_DTYPES)}")
        return (model,)


NODE_CLASS_MAPPINGS = {
    "TextEncodeQwenImageEdit": TextEncodeQwenImageEdit,
    "TextEncodeQwenImageEditPlus": TextEncodeQwenImageEditPlus,
    "TextEncodeQwenImage21": TextEncodeQwenImage21,
    "QwenImage21Cache": QwenImage21Cache,
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {
    "TextEncodeQwenImage21": "Text Encode Qwen Image 2.1",
    "QwenImage21Cache": "Qwen Image 2.1 Cache",
}
