"""The model-free sampling nodes of ComfyUI's comfy_extras.nodes_lt (LTX-Video): LTXVScheduler (a Flux-style
time-shifted schedule whose shift follows the latent's token count, optionally stretched to end at a terminal
sigma), ModelSamplingLTXV (the same shift as a MODEL's Flux sampling), LTXVConditioning (the frame rate on
both conditionings) and LTXVDualCFGGuider (CFG with one scale for an audio-video latent's video and another for
its audio; the step applies it, nodes.modelfns.denoise). None needs LTX weights: the scheduler and the sampling patch work on any flow model, and
a model that does not read frame_rate ignores it, as in ComfyUI."""

from __future__ import annotations

import math
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.inputs import require_model
from nodes.modelfns.model_options import with_sampling

MODULE = "comfy_extras.nodes_lt"
# The token counts between which the shift is interpolated linearly from base_shift to max_shift.
_TOKENS_LOW, _TOKENS_HIGH = 1024, 4096
_DEFAULT_TOKENS = 4096


def _tokens(latent: dict | None) -> int:
    """Latent positions per sample (frames x height x width; an audio-video pair's video); 4096 without a latent."""
    if latent is None:
        return _DEFAULT_TOKENS
    samples = latent.get("samples") if isinstance(latent, dict) else None
    if getattr(samples, "is_nested", False):  # an audio-video pair counts as its video, as ComfyUI's shape does
        samples = samples.unbind()[0]
    if not isinstance(samples, torch.Tensor):
        raise TypeError("latent: expected a LATENT (a dict with 'samples')")
    return math.prod(samples.shape[2:])


def token_shift(tokens: int, max_shift: float, base_shift: float) -> float:
    slope = (max_shift - base_shift) / (_TOKENS_HIGH - _TOKENS_LOW)
    return tokens * slope + (base_shift - slope * _TOKENS_LOW)


def ltxv_sigmas(steps: int, shift: float, stretch: bool, terminal: float) -> torch.Tensor:
    """Linear times 1..0 through Flux's time shift exp(shift) / (exp(shift) + 1/t - 1); with `stretch` the
    non-zero sigmas are rescaled in (1 - sigma) so that the last one equals `terminal`."""
    t = torch.linspace(1.0, 0.0, steps + 1)
    sigmas = torch.where(t != 0, math.exp(shift) / (math.exp(shift) + (1 / t - 1)), 0)
    if stretch:
        live = sigmas != 0
        rest = 1.0 - sigmas[live]
        sigmas[live] = 1.0 - rest / (rest[-1] / (1.0 - terminal))
    return sigmas


class LTXVScheduler:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "sampling/custom_sampling/schedulers"
    RETURN_TYPES = ("SIGMAS",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = (
        "LTX-Video's schedule: a Flux time shift interpolated from the latent's token count, stretched "
        "so that its last non-zero sigma is the terminal value."
    )

    @classmethod
    def INPUT_TYPES(cls):
        shift = {"min": 0.0, "max": 100.0, "step": 0.01}
        return {
            "required": {
                "steps": ("INT", {"default": 20, "min": 1, "max": 10000}),
                "max_shift": ("FLOAT", {"default": 2.05, **shift}),
                "base_shift": ("FLOAT", {"default": 0.95, **shift}),
                "stretch": (
                    "BOOLEAN",
                    {"tooltip": "Stretch the sigmas to end at the terminal value.", "default": True},
                ),
                "terminal": (
                    "FLOAT",
                    {
                        "tooltip": "The last non-zero sigma after stretching.",
                        "default": 0.1,
                        "min": 0.0,
                        "max": 0.99,
                        "step": 0.01,
                    },
                ),
            },
            "optional": {"latent": ("LATENT", {})},
        }

    def execute(
        self,
        steps: int,
        max_shift: float,
        base_shift: float,
        stretch: bool,
        terminal: float,
        latent: dict | None = None,
    ) -> tuple[torch.Tensor]:
        shift = token_shift(_tokens(latent), max_shift, base_shift)
        return (ltxv_sigmas(int(steps), shift, bool(stretch), float(terminal)),)


class ModelSamplingLTXV:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "advanced/model"
    RETURN_TYPES = ("MODEL",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = "Samples the model with Flux's schedule, its shift interpolated from the latent's token count."

    @classmethod
    def INPUT_TYPES(cls):
        shift = {"min": 0.0, "max": 100.0, "step": 0.01}
        return {
            "required": {
                "model": ("MODEL", {}),
                "max_shift": ("FLOAT", {"default": 2.05, **shift}),
                "base_shift": ("FLOAT", {"default": 0.95, **shift}),
            },
            "optional": {"latent": ("LATENT", {})},
        }

    def execute(self, model: Any, max_shift: float, base_shift: float, latent: dict | None = None) -> tuple[ModelRef]:
        shift = token_shift(_tokens(latent), max_shift, base_shift)
        return (with_sampling(require_model(model), {"kind": "flux", "prediction": "const", "shift": shift}),)


class LTXVConditioning:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING")
    RETURN_NAMES = ("positive", "negative")
    OUTPUT_TOOLTIPS = (None, None)
    DESCRIPTION = "Sets the video's frame rate on both conditionings (read by LTX-Video models)."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "positive": ("CONDITIONING", {}),
                "negative": ("CONDITIONING", {}),
                "frame_rate": ("FLOAT", {"default": 25.0, "min": 0.0, "max": 1000.0, "step": 0.01}),
            }
        }

    def execute(self, positive: list, negative: list, frame_rate: float) -> tuple[list, list]:
        values = {"frame_rate": frame_rate}
        return (set_values(require(positive, "positive"), values), set_values(require(negative, "negative"), values))


class LTXVDualCFGGuider:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "model/sampling/guiders"
    RETURN_TYPES = ("GUIDER",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = "Separate CFG scales for the video and audio modalities of a packed LTXV-AV latent."

    @classmethod
    def INPUT_TYPES(cls):
        scale = {"min": 0.0, "max": 100.0, "step": 0.1, "round": 0.01}
        return {
            "required": {
                "model": ("MODEL", {}),
                "positive": ("CONDITIONING", {}),
                "negative": ("CONDITIONING", {}),
                "video_cfg": ("FLOAT", {"default": 3.0, **scale}),
                "audio_cfg": ("FLOAT", {"default": 7.0, **scale}),
            }
        }

    def execute(self, model: Any, positive: list, negative: list, video_cfg: float, audio_cfg: float):
        from nodes.ksampler import GuiderChoice

        return (
            GuiderChoice(
                require_model(model),
                require(positive, "positive"),
                require(negative, "negative"),
                float(video_cfg),
                kind="modality",
                cfg2=float(audio_cfg),
            ),
        )


NODE_CLASS_MAPPINGS = {
    "LTXVScheduler": LTXVScheduler,
    "ModelSamplingLTXV": ModelSamplingLTXV,
    "LTXVConditioning": LTXVConditioning,
    "LTXVDualCFGGuider": LTXVDualCFGGuider,
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {"LTXVDualCFGGuider": "LTXV Dual CFG Guider"}
