"""LTX-2's audio VAE nodes (ComfyUI's comfy_extras.nodes_lt_audio): LTXVAudioVAELoader (the audio VAE of a
published LTX-2 file in the checkpoints folder), LTXAVTextEncoderLoader (Gemma 3 from text_encoders with the
text side of an LTX-2 checkpoint: nodes.models.ltx2_text), LTXVEmptyLatentAudio (zeros covering a video's duration) and
LTXVAudioVAEDecode (an audio latent, or the audio half of an audio-video latent, to a stereo waveform; the decode
is the ModelFn ltx2_audio_decode) and LTXVAudioVAEEncode (audio to an audio latent: resampled, its log-mel
spectrogram (nodes.models.audio_mel), the ModelFn ltx2_audio_encode). Checked against ComfyUI 0.10.0 by tests/nodes/test_ltxv_audio.py."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.ksampler import call_model_fn
from nodes.loaders import make_ref, model_file, model_files

MODULE = "comfy_extras.nodes_lt_audio"
COMPONENT, ARCH = "audio_vae", "ltx2_audio"


def _audio_vae(value: Any, input_name: str = "audio_vae") -> ModelRef:
    if isinstance(value, ModelRef) and value.component == "vae" and value.arch == ARCH:
        # an audio VAE file through VAELoader (the LTX-2.5 templates'): ComfyUI's VAE holds the same AudioVAE
        return dataclasses.replace(value, component=COMPONENT)
    if not isinstance(value, ModelRef) or value.component != COMPONENT:
        raise ValueError(f"{input_name}: expected the Audio VAE of LTXV Audio VAE Loader, got {value!r}")
    return value


def _config(ref: ModelRef) -> dict[str, Any]:
    from nodes.models.ltx2_audio import read_config

    return read_config(ref.sources[0])


class LTXVAudioVAELoader:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "audio"
    RETURN_TYPES = ("VAE",)
    RETURN_NAMES = ("Audio VAE",)
    DESCRIPTION = "The audio VAE (mel autoencoder and vocoder) of an LTX-2 checkpoint or audio VAE file."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "ckpt_name": (
                    "COMBO",
                    {
                        "multiselect": False,
                        "options": model_files("checkpoints"),
                        "tooltip": "Audio VAE checkpoint to load.",
                    },
                )
            }
        }

    def execute(self, ckpt_name: str):
        from nodes.models.errors import ModelLoadError
        from nodes.models.ltx2_audio import read_config

        path = model_file("checkpoints", ckpt_name, "ckpt_name")
        try:
            read_config(str(path))
        except ModelLoadError as e:
            raise ValueError(f"ckpt_name: {e}") from e
        return (make_ref(COMPONENT, ARCH, [path]),)


class LTXAVTextEncoderLoader:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "advanced/loaders"
    RETURN_TYPES = ("CLIP",)
    DESCRIPTION = "[Recipes]\n\nltxav: gemma 3 12B"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "text_encoder": ("COMBO", {"multiselect": False, "options": model_files("text_encoders")}),
                "ckpt_name": ("COMBO", {"multiselect": False, "options": model_files("checkpoints")}),
                "device": ("COMBO", {"multiselect": False, "options": ["default", "cpu"]}),
            }
        }

    MODEL_FILE_INPUTS = {
        "text_encoder": ("text_encoders", "text_encoder"),
        "ckpt_name": ("checkpoints", "diffusion_model"),
    }

    def execute(self, text_encoder: str, ckpt_name: str, device: str = "default"):
        paths = [
            model_file("text_encoders", text_encoder, "text_encoder"),
            model_file("checkpoints", ckpt_name, "ckpt_name"),
        ]
        return (make_ref("text_encoder", "ltx2", paths, clip_type="ltxv"),)


class LTXVEmptyLatentAudio:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "latent/audio"
    RETURN_TYPES = ("LATENT",)
    RETURN_NAMES = ("Latent",)
    DESCRIPTION = "All-zero LTX-2 audio latents as long as frames_number video frames at frame_rate."

    @classmethod
    def INPUT_TYPES(cls):
        number = {"min": 1, "max": 1000, "step": 1, "display": "number"}
        return {
            "required": {
                "frames_number": ("INT", {"default": 97, **number}),
                "frame_rate": ("INT", {"default": 25, **number}),
                "batch_size": ("INT", {"default": 1, "min": 1, "max": 4096, "display": "number"}),
                "audio_vae": ("VAE", {"display_name": "Audio VAE"}),
            }
        }

    def execute(self, frames_number: int, frame_rate: int, batch_size: int, audio_vae: Any):
        from nodes.models.ltx2_audio import latent_frames

        config = _config(_audio_vae(audio_vae))
        frames = latent_frames(int(frames_number), int(frame_rate), config["sample_rate"], config["hop_length"])
        samples = torch.zeros(int(batch_size), config["latent_channels"], frames, config["frequency_bins"])
        return ({"samples": samples, "sample_rate": int(config["sample_rate"]), "type": "audio"},)


class LTXVAudioVAEDecode:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "audio"
    RETURN_TYPES = ("AUDIO",)
    RETURN_NAMES = ("Audio",)
    DESCRIPTION = "Decodes an LTX-2 audio latent (the audio half of an audio-video latent) to a stereo waveform."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"samples": ("LATENT", {}), "audio_vae": ("VAE", {"display_name": "Audio VAE"})}}

    async def execute(self, samples: dict, audio_vae: Any):
        ref = _audio_vae(audio_vae)
        if not isinstance(samples, dict) or "samples" not in samples:
            raise TypeError(f"samples: expected a LATENT (a dict with 'samples'), got {type(samples).__name__}")
        latent = samples["samples"]
        if getattr(latent, "is_nested", False):  # an audio-video latent: its last part is the audio
            latent = latent.unbind()[-1]
        if not isinstance(latent, torch.Tensor) or latent.ndim != 4:
            shape = tuple(latent.shape) if isinstance(latent, torch.Tensor) else type(latent).__name__
            raise ValueError(
                f"samples: expected an audio latent [batch, channels, frames, frequency bins], got {shape}"
            )
        out = await call_model_fn("ltx2_audio_decode", ref, "audio_vae", {"latent": latent.contiguous()}, {})
        return ({"waveform": out["waveform"], "sample_rate": int(_config(ref)["output_sample_rate"])},)


class LTXVAudioVAEEncode:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "audio"
    RETURN_TYPES = ("LATENT",)
    RETURN_NAMES = ("Audio Latent",)
    DESCRIPTION = "Encodes audio (mono is spread to the VAE's channels) to an LTX-2 audio latent."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"audio": ("AUDIO", {}), "audio_vae": ("VAE", {"display_name": "Audio VAE"})}}

    async def execute(self, audio: dict, audio_vae: Any):
        from nodes.models.audio_mel import log_mel, resample

        ref = _audio_vae(audio_vae)
        waveform = audio.get("waveform") if isinstance(audio, dict) else None
        if not isinstance(waveform, torch.Tensor) or waveform.ndim != 3 or "sample_rate" not in audio:
            raise ValueError("audio: expected an AUDIO (a [batch, channels, samples] waveform with its sample_rate)")
        config = _config(ref)
        if waveform.shape[1] == 1:  # ComfyUI spreads mono over the encoder's two channels
            waveform = waveform.expand(-1, 2, -1)
        elif waveform.shape[1] != 2:
            raise ValueError(f"audio: the LTX-2 audio VAE encodes 1 or 2 channels, got {waveform.shape[1]}")
        # resampling and the mel spectrogram are plain signal processing, done here; the ModelFn runs the encoder
        waveform = resample(waveform.float(), int(audio["sample_rate"]), config["sample_rate"])
        mel = log_mel(waveform, config["sample_rate"], config["n_fft"], config["hop_length"], config["mel_bins"])
        out = await call_model_fn("ltx2_audio_encode", ref, "audio_vae", {"mel": mel.contiguous()}, {})
        return ({"samples": out["latent"], "sample_rate": int(config["sample_rate"]), "type": "audio"},)


NODE_CLASS_MAPPINGS = {
    cls.__name__: cls
    for cls in (
        LTXVAudioVAELoader,
        LTXAVTextEncoderLoader,
        LTXVEmptyLatentAudio,
        LTXVAudioVAEDecode,
        LTXVAudioVAEEncode,
    )
}
NODE_DISPLAY_NAME_MAPPINGS = {
    "LTXVAudioVAELoader": "LTXV Audio VAE Loader",
    "LTXAVTextEncoderLoader": "LTXV Audio Text Encoder Loader",
    "LTXVEmptyLatentAudio": "LTXV Empty Latent Audio",
    "LTXVAudioVAEDecode": "LTXV Audio VAE Decode",
    "LTXVAudioVAEEncode": "LTXV Audio VAE Encode",
}
