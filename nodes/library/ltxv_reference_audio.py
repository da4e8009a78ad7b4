"""LTXVReferenceAudio: the reference voice of LTX-2.3's ID-LoRA (speaker identity transfer).

Facts from ComfyUI's newest comfy_extras/nodes_lt.py (Comfy-Org/ComfyUI b2f605a6; not in 0.10.0): the reference
audio is resampled to the audio VAE's rate and encoded (as LTXVAudioVAEEncode encodes), its latent [B,C,T,F] read as
T tokens of C*F values, and both conditionings carry them as `ref_audio` ({"tokens": ...}); the LTX-2 transformer puts
them before the audio tokens at timestep 0 (nodes.models.ltx25_transformer.run_network). The MODEL gets a post-CFG
function, identity guidance: while sigma is within [start_percent, end_percent] of the schedule, the positive prompt
is evaluated once more without the reference and the result becomes cfg_result + (cond - no_reference) * scale;
a scale of 0 changes nothing (no extra pass). Checked by tests/nodes/test_ltxv_reference_audio.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.inputs import require_model
from nodes.library.ltxv_audio import LTXVAudioVAEEncode
from nodes.modelfns.model_options import sampling_config, with_function
from nodes.modelfns.network_patches import CALC_COND
from nodes.sampling.model_sampling import model_sampling_from_config

MODULE = "comfy_extras.nodes_lt"
REF_AUDIO = "ref_audio"  # the conditioning key (ComfyUI's), and the cond entries' flag


def reference_tokens(latent: torch.Tensor) -> torch.Tensor:
    """An audio latent [B,C,T,F] as the transformer's audio tokens [B,T,C*F] (its patchifier's order)."""
    b, c, t, f = latent.shape
    return latent.permute(0, 2, 1, 3).reshape(b, t, c * f)


@dataclass(frozen=True)
class IdentityGuidance:
    """The post-CFG function: guidance away from the prediction made without the reference audio."""

    scale: float
    sigma_start: float
    sigma_end: float

    def __call__(self, args: dict) -> torch.Tensor:
        out = args["denoised"]
        if self.scale == 0:
            return out
        s = float(args["sigma"].reshape(-1)[0])
        if s > self.sigma_start or s < self.sigma_end:
            return out
        # the positive side's entries without their reference (the tokens stay among the step's inputs, unread)
        without = [{k: v for k, v in e.items() if k != REF_AUDIO} for e in args["cond"]]
        options = args["model_options"]
        (no_reference,) = options[CALC_COND](args["model"], [without], args["input"], args["sigma"], options)
        return out + (args["cond_denoised"] - no_reference) * self.scale


class LTXVReferenceAudio:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "model/conditioning/ltxv"
    RETURN_TYPES = ("MODEL", "CONDITIONING", "CONDITIONING")
    RETURN_NAMES = ("model", "positive", "negative")
    DESCRIPTION = (
        "Gives an LTX-2 audio-video model a reference voice for an ID-LoRA: the clip is encoded with the audio VAE "
        "and its tokens join both conditionings; identity guidance adds one extra pass per step without the "
        "reference and pushes the result away from it, strengthening the speaker's identity."
    )

    @classmethod
    def INPUT_TYPES(cls):
        percent = {"min": 0.0, "max": 1.0, "step": 0.001, "advanced": True}
        return {
            "required": {
                "model": ("MODEL", {}),
                "positive": ("CONDITIONING", {}),
                "negative": ("CONDITIONING", {}),
                "reference_audio": (
                    "AUDIO",
                    {"tooltip": "The voice to transfer; about 5 seconds works best (the length the ID-LoRA saw)."},
                ),
                "audio_vae": ("VAE", {"display_name": "Audio VAE", "tooltip": "The LTX-2 audio VAE that encodes it."}),
                "identity_guidance_scale": (
                    "FLOAT",
                    {
                        "default": 3.0,
                        "min": 0.0,
                        "max": 100.0,
                        "step": 0.01,
                        "round": 0.01,
                        "tooltip": "How strongly to push away from the prediction without the reference (one extra "
                        "pass per step); 0 turns it off.",
                    },
                ),
                "start_percent": (
                    "FLOAT",
                    {"default": 0.0, **percent, "tooltip": "Where in the schedule identity guidance starts."},
                ),
                "end_percent": (
                    "FLOAT",
                    {"default": 1.0, **percent, "tooltip": "Where in the schedule identity guidance ends."},
                ),
            }
        }

    async def execute(
        self,
        model: Any,
        positive: list,
        negative: list,
        reference_audio: dict,
        audio_vae: Any,
        identity_guidance_scale: float = 3.0,
        start_percent: float = 0.0,
        end_percent: float = 1.0,
    ):
        require_model(model)
        require(positive, "positive")
        require(negative, "negative")
        (latent,) = await LTXVAudioVAEEncode().execute(reference_audio, audio_vae)
        ref = {"tokens": reference_tokens(latent["samples"])}
        ms = model_sampling_from_config(sampling_config(model))
        guidance = IdentityGuidance(
            float(identity_guidance_scale),
            float(ms.percent_to_sigma(float(start_percent))),
            float(ms.percent_to_sigma(float(end_percent))),
        )
        return (
            with_function(model, "sampler_post_cfg_function", guidance),
            set_values(positive, {REF_AUDIO: ref}),
            set_values(negative, {REF_AUDIO: ref}),
        )


NODE_CLASS_MAPPINGS = {"LTXVReferenceAudio": LTXVReferenceAudio}
NODE_DISPLAY_NAME_MAPPINGS = {"LTXVReferenceAudio": "LTXV Reference Audio (ID-LoRA)"}
