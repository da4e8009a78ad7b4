"""Core nodes that call models: text encoding, sampling, VAE, ControlNet application.
Each body is a composition of ModelFn calls through the runtime."""

from __future__ import annotations

import torch

from cluster.refs import ModelRef
from nodes.conditioning import ControlSpec, require
from nodes.inputs import require_component
from nodes.ksampler import call_model_fn, common_ksampler
from nodes.modelfns.hooks import encodings
from nodes.models.components import ANIMA_KEYS, BYT5_KEYS, HIDREAM_KEYS, TEXT_MASK_KEYS
from nodes.sampling.samplers import SAMPLER_NAMES
from nodes.sampling.schedules import SCHEDULER_NAMES

MAX_RESOLUTION = 16384
SEED = (
    "INT",
    {
        "default": 0,
        "min": 0,
        "max": 0xFFFFFFFFFFFFFFFF,
        "control_after_generate": True,
        "tooltip": "The random seed of the initial noise.",
    },
)
STEPS = ("INT", {"default": 20, "min": 1, "max": 10000, "tooltip": "The number of denoising steps."})
CFG = (
    "FLOAT",
    {
        "default": 8.0,
        "min": 0.0,
        "max": 100.0,
        "step": 0.1,
        "round": 0.01,
        "tooltip": "Classifier-free guidance scale.",
    },
)


class CLIPTextEncode:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "text": ("STRING", {"multiline": True, "dynamicPrompts": True, "tooltip": "The text to encode."}),
                "clip": ("CLIP", {"tooltip": "The text encoder."}),
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    OUTPUT_TOOLTIPS = ("Conditioning that guides the diffusion model towards the text.",)
    FUNCTION = "encode"
    CATEGORY = "conditioning"
    DESCRIPTION = "Encodes a text prompt with a CLIP text encoder into conditioning."

    async def encode(self, clip, text):
        clip = require_component(clip, "text_encoder", "clip")
        conditioning = []
        for ref, extra in encodings(clip):  # one, or one per keyframe range of a scheduled hooked CLIP
            out = await call_model_fn("text_encode", ref, "clip", {}, {"text": text})
            # Anima's T5 ids, HiDream's Llama, a text mask, Hunyuan Image's ByT5 states
            anima = {k: out[k] for k in ANIMA_KEYS + HIDREAM_KEYS + TEXT_MASK_KEYS + BYT5_KEYS if k in out}
            if "sam3_multi_cond" in out:  # SAM 3's comma-separated prompts, one entry each (ComfyUI's layout)
                from nodes.models.sam3_text import multi_cond

                anima["sam3_multi_cond"] = multi_cond(out)
            if "unprocessed_ltxav_embeds" in out:  # LTX-2.5's encoder: its connectors are the transformer's
                anima["unprocessed_ltxav_embeds"] = True
            conditioning.append([out["cond"], {"pooled_output": out.get("pooled"), **anima, **extra}])
        return (conditioning,)


class KSampler:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {"tooltip": "The model that denoises the latent."}),
                "seed": SEED,
                "steps": STEPS,
                "cfg": CFG,
                "sampler_name": (SAMPLER_NAMES, {"tooltip": "The sampling algorithm."}),
                "scheduler": (SCHEDULER_NAMES, {"tooltip": "How noise levels are spaced over the steps."}),
                "positive": ("CONDITIONING", {"tooltip": "What the image should contain."}),
                "negative": ("CONDITIONING", {"tooltip": "What the image should not contain."}),
                "latent_image": ("LATENT", {"tooltip": "The latent to denoise."}),
                "denoise": (
                    "FLOAT",
                    {
                        "default": 1.0,
                        "min": 0.0,
                        "max": 1.0,
                        "step": 0.01,
                        "tooltip": "How much of the latent is replaced by noise (img2img below 1).",
                    },
                ),
            }
        }

    RETURN_TYPES = ("LATENT",)
    OUTPUT_TOOLTIPS = ("The denoised latent.",)
    FUNCTION = "sample"
    CATEGORY = "sampling"
    DESCRIPTION = "Denoises a latent with the model, guided by positive and negative conditioning."

    async def sample(
        self, model, seed, steps, cfg, sampler_name, scheduler, positive, negative, latent_image, denoise=1.0
    ):
        return await common_ksampler(
            model, seed, steps, cfg, sampler_name, scheduler, positive, negative, latent_image, denoise=denoise
        )


class KSamplerAdvanced:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "add_noise": (["enable", "disable"],),
                "noise_seed": SEED,
                "steps": STEPS,
                "cfg": CFG,
                "sampler_name": (SAMPLER_NAMES,),
                "scheduler": (SCHEDULER_NAMES,),
                "positive": ("CONDITIONING",),
                "negative": ("CONDITIONING",),
                "latent_image": ("LATENT",),
                "start_at_step": ("INT", {"default": 0, "min": 0, "max": 10000}),
                "end_at_step": ("INT", {"default": 10000, "min": 0, "max": 10000}),
                "return_with_leftover_noise": (["disable", "enable"],),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "sample"
    CATEGORY = "sampling"

    async def sample(
        self,
        model,
        add_noise,
        noise_seed,
        steps,
        cfg,
        sampler_name,
        scheduler,
        positive,
        negative,
        latent_image,
        start_at_step,
        end_at_step,
        return_with_leftover_noise,
        denoise=1.0,
    ):
        return await common_ksampler(
            model,
            noise_seed,
            steps,
            cfg,
            sampler_name,
            scheduler,
            positive,
            negative,
            latent_image,
            denoise=denoise,
            disable_noise=add_noise == "disable",
            start_step=start_at_step,
            last_step=end_at_step,
            force_full_denoise=return_with_leftover_noise != "enable",
        )


class VAEDecode:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples": ("LATENT", {"tooltip": "The latent to decode."}),
                "vae": ("VAE", {"tooltip": "The VAE that decodes the latent."}),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    OUTPUT_TOOLTIPS = ("The decoded image.",)
    FUNCTION = "decode"
    CATEGORY = "latent"
    DESCRIPTION = "Decodes a latent into an image."

    async def decode(self, vae, samples):
        vae = require_component(vae, "vae", "vae")
        latent = samples["samples"]
        if getattr(latent, "is_nested", False):  # an audio-video latent: its video, as ComfyUI decodes it
            latent = latent.unbind()[0]
        out = await call_model_fn("vae_decode", vae, "vae", {"latent": latent}, {})
        return (out["image"],)


class VAEDecodeTiled:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "samples": ("LATENT",),
                "vae": ("VAE",),
                "tile_size": ("INT", {"default": 512, "min": 64, "max": 4096, "step": 32}),
                "overlap": ("INT", {"default": 64, "min": 0, "max": 4096, "step": 32}),
                "temporal_size": (
                    "INT",
                    {"default": 64, "min": 8, "max": 4096, "step": 4, "tooltip": "Only used for video VAEs."},
                ),
                "temporal_overlap": (
                    "INT",
                    {"default": 8, "min": 4, "max": 4096, "step": 4, "tooltip": "Only used for video VAEs."},
                ),
            }
        }

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "decode"
    CATEGORY = "_for_testing"

    async def decode(self, vae, samples, tile_size, overlap=64, temporal_size=64, temporal_overlap=8):
        vae = require_component(vae, "vae", "vae")
        if tile_size < overlap * 4:
            overlap = tile_size // 4
        if temporal_size < temporal_overlap * 2:
            temporal_overlap = temporal_overlap // 2
        params = {"tile": tile_size, "overlap": overlap, "temporal_size": temporal_size}
        out = await call_model_fn(
            "vae_decode", vae, "vae", {"latent": samples["samples"]}, {**params, "temporal_overlap": temporal_overlap}
        )
        return (out["image"],)


class VAEEncode:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"pixels": ("IMAGE",), "vae": ("VAE",)}}

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "encode"
    CATEGORY = "latent"

    async def encode(self, vae, pixels):
        vae = require_component(vae, "vae", "vae")
        return ({"samples": await encode_pixels(vae, pixels[:, :, :, :3])},)


# ComfyUI crops the pixels to the VAE's downscale ratio: 8 but for these (Stable Cascade's stage A: 4, its stage C
# coder: 32; SeedVR2's VAE is not cropped, crop_input False: its encoder pads)
DOWNSCALE_RATIO = {"pixel_space": 1, "stable_cascade_b": 4, "stable_cascade_c": 32, "seedvr2": 1}


async def encode_pixels(vae: ModelRef, pixels: torch.Tensor) -> torch.Tensor:
    """The raw latent of an IMAGE [B,H,W,3] through the vae_encode ModelFn, centre-cropped as ComfyUI crops it."""
    multiple = DOWNSCALE_RATIO.get(vae.arch, 8)
    out = await call_model_fn("vae_encode", vae, "vae", {"pixels": crop_to_multiple(pixels, multiple)}, {})
    return out["latent"]


def crop_to_multiple(pixels: torch.Tensor, m: int) -> torch.Tensor:
    """Centre-crop an IMAGE so both sides are multiples of the VAE's downscale factor (as ComfyUI does)."""
    h, w = (pixels.shape[1] // m) * m, (pixels.shape[2] // m) * m
    if h == 0 or w == 0:
        raise ValueError(f"pixels: image of {pixels.shape[2]}x{pixels.shape[1]} is smaller than {m}x{m}")
    y, x = (pixels.shape[1] % m) // 2, (pixels.shape[2] % m) // 2
    return pixels[:, y : y + h, x : x + w, :]


def check_hint(image) -> torch.Tensor:
    """A ControlNet hint as RGB [B,H,W,3]; what is not an IMAGE of at least 8x8 is refused by name."""
    if not isinstance(image, torch.Tensor) or image.ndim != 4 or image.shape[-1] not in (1, 3, 4):
        raise ValueError("image: ControlNet hint must be an IMAGE [B,H,W,C]")
    if image.shape[1] < 8 or image.shape[2] < 8:
        raise ValueError(f"image: ControlNet hint of {image.shape[2]}x{image.shape[1]} is too small (min 8x8)")
    return image[..., :3] if image.shape[-1] != 1 else image.expand(-1, -1, -1, 3)


def apply_control(
    conditioning: list,
    control_net: ModelRef,
    image: torch.Tensor,
    strength: float,
    start: float,
    end: float,
    previous: dict,
    extra: torch.Tensor | None = None,
) -> list:
    out = []
    for cond, opts in conditioning:
        opts = dict(opts)
        prev = opts.get("control")
        key = id(prev)
        if key not in previous:  # conds sharing a chain keep sharing it, so they batch together
            previous[key] = ControlSpec(control_net, image, strength, start, end, prev, extra)
        opts["control"] = previous[key]
        opts["control_apply_to_uncond"] = False
        out.append([cond, opts])
    return out


class ControlNetApply:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "conditioning": ("CONDITIONING",),
                "control_net": ("CONTROL_NET",),
                "image": ("IMAGE",),
                "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 10.0, "step": 0.01}),
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "apply_controlnet"
    CATEGORY = "conditioning/controlnet"
    DEPRECATED = True

    def apply_controlnet(self, conditioning, control_net, image, strength):
        conditioning = require(conditioning, "conditioning")
        if strength == 0:
            return (conditioning,)
        control_net = require_component(control_net, "controlnet", "control_net")
        return (apply_control(conditioning, control_net, check_hint(image), strength, 0.0, 1.0, {}),)


# ControlNets whose hints the apply node's VAE encodes (ComfyUI's ControlNets with a latent format)
LATENT_HINT_ARCHS = frozenset({"sd3", "qwen_image"})


def with_hint_vae(control_net: ModelRef, vae: ModelRef) -> ModelRef:
    """The ControlNet with the VAE that encodes its hints (SD3 and Qwen-Image ControlNets take latent hints).
    ComfyUI encodes the hint of any ControlNet given a VAE, which image-hint (SD1/SDXL) ControlNets cannot take."""
    if control_net.arch not in LATENT_HINT_ARCHS:
        raise ValueError(
            f"control_net: this {control_net.arch} ControlNet takes image hints, not VAE-encoded "
            "ones: apply it without a VAE"
        )
    return control_net.with_option("vae", vae)


class ControlNetApplyAdvanced:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "positive": ("CONDITIONING",),
                "negative": ("CONDITIONING",),
                "control_net": ("CONTROL_NET",),
                "image": ("IMAGE",),
                "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 10.0, "step": 0.01}),
                "start_percent": ("FLOAT", {"default": 0.0, "min": 0.0, "max": 1.0, "step": 0.001}),
                "end_percent": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.001}),
            },
            "optional": {"vae": ("VAE",)},
        }

    RETURN_TYPES = ("CONDITIONING", "CONDITIONING")
    RETURN_NAMES = ("positive", "negative")
    FUNCTION = "apply_controlnet"
    CATEGORY = "conditioning/controlnet"

    def apply_controlnet(
        self, positive, negative, control_net, image, strength, start_percent, end_percent, vae=None, extra_concat=()
    ):
        positive, negative = require(positive, "positive"), require(negative, "negative")
        if strength == 0:
            return (positive, negative)
        control_net = require_component(control_net, "controlnet", "control_net")
        if vae is not None:
            control_net = with_hint_vae(control_net, require_component(vae, "vae", "vae"))
        hint = check_hint(image)
        shared: dict = {}
        return (
            apply_control(positive, control_net, hint, strength, start_percent, end_percent, shared),
            apply_control(negative, control_net, hint, strength, start_percent, end_percent, shared),
        )


NODE_CLASS_MAPPINGS = {
    "CLIPTextEncode": CLIPTextEncode,
    "KSampler": KSampler,
    "KSamplerAdvanced": KSamplerAdvanced,
    "VAEDecode": VAEDecode,
    "VAEDecodeTiled": VAEDecodeTiled,
    "VAEEncode": VAEEncode,
    "ControlNetApply": ControlNetApply,
    "ControlNetApplyAdvanced": ControlNetApplyAdvanced,
}
NODE_DISPLAY_NAME_MAPPINGS = {
    "CLIPTextEncode": "CLIP Text Encode (Prompt)",
    "KSampler": "KSampler",
    "KSamplerAdvanced": "KSampler (Advanced)",
    "VAEDecode": "VAE Decode",
    "VAEDecodeTiled": "VAE Decode (Tiled)",
    "VAEEncode": "VAE Encode",
    "ControlNetApply": "Apply ControlNet (OLD)",
    "ControlNetApplyAdvanced": "Apply ControlNet",
}
