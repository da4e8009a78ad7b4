"""VAEDecodeAudio (today's ComfyUI comfy_extras.nodes_audio; interface and semantics read from its source): an
audio latent, or the audio part of an audio-video latent, decoded by the VAE VAELoader loaded, to an AUDIO. As
ComfyUI does, each batch item is divided by five times its standard deviation when that exceeds 1 (a loudness
guard), and the sample rate is the latent's own `sample_rate` if it has one, else the VAE's.

The audio VAEs here: MiniMax H3's (ModelFn minimax_h3_audio_decode). Every other VAE is refused by name, the
image/video VAEs and those of audio families whose decoder does not run here yet (Stable Audio, ACE-Step) alike;
LTX-2's audio VAE decodes through LTXV Audio VAE Decode."""

from __future__ import annotations

from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.ksampler import call_model_fn

MODULE = "comfy_extras.nodes_audio"
# arch -> (ModelFn, sample rate of its waveforms)
DECODERS = {"minimax_h3_audio": ("minimax_h3_audio_decode", 32000)}


def loudness_guard(waveform: torch.Tensor) -> torch.Tensor:
    """ComfyUI's VAEDecodeAudio normalisation: [B, C, L] divided per item by max(1, 5 x its std)."""
    std = torch.std(waveform, dim=[1, 2], keepdim=True) * 5.0
    return waveform / std.clamp(min=1.0)


def audio_part(samples: Any) -> torch.Tensor:
    if not isinstance(samples, dict) or "samples" not in samples:
        raise TypeError(f"samples: expected a LATENT (a dict with 'samples'), got {type(samples).__name__}")
    latent = samples["samples"]
    if getattr(latent, "is_nested", False):  # an audio-video latent (MiniMax H3's): its last part is the audio
        latent = latent.unbind()[-1]
    if not isinstance(latent, torch.Tensor):
        raise TypeError(f"samples: expected a latent tensor, got {type(latent).__name__}")
    return latent


class VAEDecodeAudio:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "latent/audio"
    RETURN_TYPES = ("AUDIO",)
    SEARCH_ALIASES = ["latent to audio"]

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"samples": ("LATENT", {}), "vae": ("VAE", {})}}

    async def execute(self, samples: dict, vae: Any):
        if not isinstance(vae, ModelRef):
            raise TypeError(f"vae: expected a VAE, got {type(vae).__name__}")
        if vae.arch not in DECODERS:
            hint = " (decode LTX-2's audio with LTXV Audio VAE Decode)" if vae.arch == "ltx2_audio" else ""
            raise ValueError(
                f"vae: VAE Decode Audio decodes MiniMax H3's audio VAE here; the {vae.arch} VAE "
                f"({', '.join(vae.sources) or 'no file'}) is not one it decodes{hint}"
            )
        fn, rate = DECODERS[vae.arch]
        latent = audio_part(samples)
        out = await call_model_fn(fn, vae, "vae", {"latent": latent.contiguous()}, {})
        waveform = loudness_guard(out["waveform"].float())
        return ({"waveform": waveform, "sample_rate": int(samples.get("sample_rate", rate))},)


NODE_CLASS_MAPPINGS = {"VAEDecodeAudio": VAEDecodeAudio}
NODE_DISPLAY_NAME_MAPPINGS = {"VAEDecodeAudio": "VAE Decode Audio"}
