"""Sampling and model patches of today's ComfyUI: Dual Model CFG Guider (comfy_extras.nodes_custom_sampler: the
negative side sampled on a second MODEL), CFG Override (comfy_extras.nodes_custom_sampler: a fixed cfg over a
range of the schedule, carried on the MODEL and applied per model evaluation by the denoise step) and ModelNoiseScale
(comfy_extras.nodes_model_advanced: the training noise scale of a discrete-flow model, which multiplies the noise
where a latent is noised), both newer than 0.10.0 and read from the newest Comfy-Org/ComfyUI source; ScaleROPE
(comfy_extras.nodes_rope, as ComfyUI 0.10.0 has it: scales and shifts of the image position ids the Flux networks
read); Normalized Attention Guidance (comfy_extras.nodes_nag, newest source: the positive pass's self-attention
output pushed away from the negative pass's, on the UNet families)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.conditioning import require
from nodes.inputs import require_model
from nodes.ksampler import GuiderChoice
from nodes.modelfns.model_options import CFG_OVERRIDES, ROPE, sampling_config, with_function, with_sampling
from nodes.modelfns.network_patches import with_network_patch
from nodes.sampling.model_sampling import model_sampling_from_config


class CFGOverride:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_custom_sampler"
    FUNCTION = "execute"
    CATEGORY = "model/sampling/guiders"
    RETURN_TYPES = ("MODEL",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = (
        "Overrides cfg with a fixed value over a [start, end) percent (sigma) range of sampling. Of "
        "several overrides, the one nearest the sampler wins where they overlap."
    )

    @classmethod
    def INPUT_TYPES(cls):
        percent = {"min": 0.0, "max": 1.0, "step": 0.001}
        return {
            "required": {
                "model": ("MODEL", {}),
                "cfg": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 100.0, "step": 0.1, "round": 0.01}),
                "start_percent": ("FLOAT", {"default": 0.0, **percent}),
                "end_percent": ("FLOAT", {"default": 1.0, **percent}),
            }
        }

    def execute(self, model: Any, cfg: float, start_percent: float, end_percent: float) -> tuple[ModelRef]:
        model = require_model(model)
        # the range in sigmas of the MODEL's schedule as it is now, as ComfyUI reads it when the node runs
        ms = model_sampling_from_config(sampling_config(model))
        high, low = float(ms.percent_to_sigma(start_percent)), float(ms.percent_to_sigma(end_percent))
        ranges = tuple(model.option(CFG_OVERRIDES, ())) + ((low, high, float(cfg)),)
        return (model.with_option(CFG_OVERRIDES, ranges),)


class ModelNoiseScale:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_model_advanced"
    FUNCTION = "patch"
    CATEGORY = "model/patch"
    RETURN_TYPES = ("MODEL",)
    DESCRIPTION = (
        "Sets a discrete-flow model's training noise scale: the noise a latent is noised with is scaled by it."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "noise_scale": (
                    "FLOAT",
                    {
                        "default": 1.0,
                        "min": 0.0,
                        "max": 64.0,
                        "step": 0.01,
                        "tooltip": "The model's absolute training noise scale.",
                    },
                ),
            }
        }

    def patch(self, model: Any, noise_scale: float) -> tuple[ModelRef]:
        model = require_model(model)
        config = sampling_config(model)
        # ComfyUI rebuilds the model's sampling object with its shift and multiplier, which only the discrete
        # flow schedule (SD3, AuraFlow, Z-Image, Qwen-Image, ...) has; on any other it fails.
        if config.get("kind") != "flow":
            raise ValueError(
                f"ModelNoiseScale: the model's sampling ({config.get('kind')!r}) has no flow shift and "
                "multiplier; the noise scale applies to discrete-flow models only"
            )
        return (with_sampling(model, {**config, "noise_scale": float(noise_scale)}),)


class DualModelGuider:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_custom_sampler"
    EXPERIMENTAL = True
    FUNCTION = "get_guider"
    CATEGORY = "model/sampling/guiders"
    RETURN_TYPES = ("GUIDER",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = (
        "Classifier-free guidance with the positive pass on the model and the negative pass on "
        "model_negative (without it, ordinary CFG on the model)."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {"tooltip": "Model used for the positive (conditional) pass."}),
                "positive": ("CONDITIONING", {}),
                "cfg": ("FLOAT", {"default": 4.0, "min": 0.0, "max": 100.0, "step": 0.1, "round": 0.01}),
            },
            "optional": {
                "model_negative": ("MODEL", {"tooltip": "Model used for the negative (unconditional) pass."}),
                "negative": ("CONDITIONING", {"tooltip": "Negative conditioning run on the negative model."}),
            },
        }

    def get_guider(
        self, model: Any, positive: list, cfg: float, model_negative: Any = None, negative: list | None = None
    ) -> tuple[GuiderChoice]:
        if negative is None:
            # ComfyUI then runs the negative pass with no text at all (a null cross-attention context)
            raise ValueError(
                "DualModelGuider: negative is not connected; an unconditional pass without any "
                "conditioning is not supported here yet, connect a negative conditioning"
            )
        uncond = None if model_negative is None else require_model(model_negative)
        return (
            GuiderChoice(
                require_model(model),
                require(positive, "positive"),
                require(negative, "negative"),
                float(cfg),
                uncond_model=uncond,
            ),
        )


# Families whose ComfyUI networks read the rope options: the Flux ones here; Z-Image and Lumina 2 (ComfyUI's Lumina
# network) and Wan read them too, which their networks here do not yet. The other families have no such ids and
# ignore them.
ROPE_ARCHS = frozenset({"flux", "flux-schnell", "flux2", "kandinsky5", "kandinsky5_image"})
ROPE_NOT_YET = frozenset({"zimage", "lumina2", "wan21", "wan22_5b"})


class ScaleROPE:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_rope"
    EXPERIMENTAL = True
    FUNCTION = "execute"
    CATEGORY = "advanced/model_patches"
    RETURN_TYPES = ("MODEL",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = "Scale and shift the ROPE of the model."

    @classmethod
    def INPUT_TYPES(cls):
        scale = {"default": 1.0, "min": 0.0, "max": 100.0, "step": 0.1}
        shift = {"default": 0.0, "min": -256.0, "max": 256.0, "step": 0.1}
        return {
            "required": {
                "model": ("MODEL", {}),
                "scale_x": ("FLOAT", scale),
                "shift_x": ("FLOAT", shift),
                "scale_y": ("FLOAT", scale),
                "shift_y": ("FLOAT", shift),
                "scale_t": ("FLOAT", scale),
                "shift_t": ("FLOAT", shift),
            }
        }

    def execute(
        self, model: Any, scale_x: float, shift_x: float, scale_y: float, shift_y: float, scale_t: float, shift_t: float
    ) -> tuple[ModelRef]:
        model = require_model(model)
        if model.arch in ROPE_NOT_YET:
            raise ValueError(
                f"ScaleROPE: scaling the position ids of {model.arch} models is not implemented yet "
                f"(it is for {', '.join(sorted(ROPE_ARCHS))})"
            )
        # a later ScaleROPE replaces the values of an earlier one, as ComfyUI's set_model_rope_options does
        values = {
            "scale_x": scale_x,
            "shift_x": shift_x,
            "scale_y": scale_y,
            "shift_y": shift_y,
            "scale_t": scale_t,
            "shift_t": shift_t,
        }
        return (model.with_option(ROPE, tuple(sorted((k, float(v)) for k, v in values.items()))),)


# The families whose networks here call self-attention output patches (the ldm UNets). Today's ComfyUI also calls
# them inside its DiTs (Flux and others, on the image tokens), which the DiTs here do not yet.
NAG_ARCHS = frozenset({"sd1", "sd2", "sd2v", "sdxl"})


@dataclass(frozen=True)
class NormalizedAttentionGuidance:
    """An attn1 output patch: where a batch holds both a positive (0) and a negative (1) pass, the positive
    pass's output becomes z_pos * scale - z_neg * (scale - 1), its L1 norm over the features capped at tau
    times the positive's, blended with the positive's by alpha."""

    scale: float
    alpha: float
    tau: float

    def __call__(self, out: torch.Tensor, options: dict) -> torch.Tensor:
        sides = options.get("cond_or_uncond")
        if not sides or 0 not in sides or 1 not in sides:
            return out
        n = out.shape[0] // len(sides)
        pos, neg = sides.index(0), sides.index(1)
        z_pos, z_neg = out[n * pos : n * (pos + 1)], out[n * neg : n * (neg + 1)]
        guided = z_pos * self.scale - z_neg * (self.scale - 1.0)
        norm_pos = torch.norm(z_pos, p=1, dim=-1, keepdim=True).clamp_min(1e-6)
        ratio = torch.norm(guided, p=1, dim=-1, keepdim=True).clamp_min(1e-6) / norm_pos
        guided = guided * (torch.minimum(ratio, torch.full_like(ratio, self.tau)) / ratio)
        out = out.clone()
        out[n * pos : n * (pos + 1)] = guided * self.alpha + z_pos * (1.0 - self.alpha)
        return out


class NAGuidance:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_nag"
    EXPERIMENTAL = True
    FUNCTION = "execute"
    CATEGORY = "advanced/guidance"
    RETURN_TYPES = ("MODEL",)
    OUTPUT_TOOLTIPS = ("The patched model with NAG enabled.",)
    DESCRIPTION = "Applies Normalized Attention Guidance, which makes negative prompts work on distilled models."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {"tooltip": "The model to apply NAG to."}),
                "nag_scale": (
                    "FLOAT",
                    {
                        "min": 0.0,
                        "default": 5.0,
                        "max": 50.0,
                        "step": 0.1,
                        "tooltip": "How far from the negative prompt to push.",
                    },
                ),
                "nag_alpha": (
                    "FLOAT",
                    {
                        "min": 0.0,
                        "default": 0.5,
                        "max": 1.0,
                        "step": 0.01,
                        "tooltip": "Blend of the normalized attention: 1 replaces, 0 no effect.",
                    },
                ),
                "nag_tau": ("FLOAT", {"min": 1.0, "default": 1.5, "max": 10.0, "step": 0.01}),
            }
        }

    def execute(self, model: Any, nag_scale: float, nag_alpha: float, nag_tau: float) -> tuple[ModelRef]:
        model = require_model(model)
        if model.arch not in NAG_ARCHS:
            raise ValueError(
                f"NAGuidance: Normalized Attention Guidance on {model.arch} models is not implemented "
                f"yet (it is for {', '.join(sorted(NAG_ARCHS))})"
            )
        patch = NormalizedAttentionGuidance(float(nag_scale), float(nag_alpha), float(nag_tau))
        # the negative pass must run even at cfg 1: NAG reads it inside the positive pass's batch
        return (
            with_network_patch(with_function(model, "disable_cfg1_optimization", True), "attn1_output_patch", patch),
        )


NODE_CLASS_MAPPINGS = {
    "CFGOverride": CFGOverride,
    "ModelNoiseScale": ModelNoiseScale,
    "ScaleROPE": ScaleROPE,
    "DualModelGuider": DualModelGuider,
    "NAGuidance": NAGuidance,
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {
    "CFGOverride": "CFG Override",
    "DualModelGuider": "Dual Model CFG Guider",
    "NAGuidance": "Normalized Attention Guidance",
}
