"""ComfyUI's audio file nodes (`comfy_extras.nodes_audio`): LoadAudio, RecordAudio, SaveAudio (FLAC),
SaveAudioMP3, SaveAudioOpus, PreviewAudio, TrimAudioDuration, SplitAudioChannels, JoinAudioChannels,
AudioConcat, AudioMerge, AudioAdjustVolume, EmptyAudio and EmptyLatentAudio, with the interface of
ComfyUI 0.10.0 (read from its source: its audio nodes need torchaudio, which has no build for our torch, so
they could not be recorded), and SaveAudioAdvanced, added later, as the newest source declares it (the
format a dynamic combo whose MP3 and Opus options bring a quality).

Files are `<prefix>_<counter:05>_.<format>`, one per batch item, the workflow in the container's tags; the
UI result is `{"audio": [file, ...]}`, which the web UI plays from /view. Decoding and encoding are PyAV's
(`nodes.media.audio`), resampling for Opus too: no torchaudio.
"""

from __future__ import annotations

import os
import random
from typing import Any

import torch

from nodes import image_io, output_claims
from nodes.dynamic_inputs import DynamicSection, combo_inputs, dynamic_combo
from nodes.image_io import annotated_path, file_sha256, save_image_path
from nodes.library.video import input_files
from nodes.media.audio import check_audio, encode_to_bytes, load_audio, resample, workflow_tags
from nodes.output_claims import write_atomic
from nodes.workspace import active

MODULE = "comfy_extras.nodes_audio"
# The latent of Stable Audio's VAE: 64 channels, one frame per 2048 samples at 44.1 kHz.
LATENT_CHANNELS, LATENT_RATE, LATENT_HOP = 64, 44100, 2048
PREVIEW_LETTERS = "abcdefghijklmnopqrstuvwxyz"
MP3_QUALITY = ("COMBO", {"default": "V0", "multiselect": False, "options": ["V0", "128k", "320k"]})
OPUS_QUALITY = ("COMBO", {"default": "128k", "multiselect": False, "options": ["64k", "96k", "128k", "192k", "320k"]})


def save_audio(
    audio: Any,
    filename_prefix: str,
    folder_type: str,
    fmt: str,
    quality: str = "128k",
    prompt: Any = None,
    extra_pnginfo: dict | None = None,
) -> list[dict[str, str]]:
    """Write each batch item of an AUDIO value as a `fmt` file into the output or temp folder; the UI
    result entries of the files."""
    waveform, sample_rate = check_audio(audio)
    base = getattr(active(), f"{folder_type}_dir")
    folder, stem, counter, subfolder, _ = save_image_path(filename_prefix, base)
    taken = output_claims.claim(folder, stem, counter, waveform.shape[0])
    if taken.folder != folder:  # a dead run's claim, made under a prefix with time variables
        subfolder = os.path.relpath(taken.folder, os.path.abspath(base))
    tags = workflow_tags(prompt, extra_pnginfo) if image_io.metadata_enabled() else {}
    results = []
    for batch_number, item in enumerate(waveform):
        file = f"{taken.stem.replace('%batch_num%', str(batch_number))}_{taken.counter + batch_number:05}_.{fmt}"
        data = encode_to_bytes(item, sample_rate, fmt, quality, tags)
        write_atomic(os.path.join(taken.folder, file), lambda tmp, data=data: _write(tmp, data))
        results.append({"filename": file, "subfolder": subfolder, "type": folder_type})
    return results


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


class SaveAudio:
    RELATIVE_PYTHON_MODULE = MODULE
    SEARCH_ALIASES = ["export flac"]
    FORMAT = "flac"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "audio": ("AUDIO", {}),
                "filename_prefix": ("STRING", {"default": "audio/ComfyUI", "multiline": False}),
            },
            "hidden": {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"},
        }

    RETURN_TYPES = ()
    FUNCTION = "save_audio"
    OUTPUT_NODE = True
    CATEGORY = "audio"
    DESCRIPTION = "Saves the audio into the output folder as FLAC (16-bit), with the workflow in its tags."

    def save_audio(
        self,
        audio: dict,
        filename_prefix: str = "audio/ComfyUI",
        quality: str = "128k",
        prompt: Any = None,
        extra_pnginfo: dict | None = None,
    ):
        return {
            "ui": {"audio": save_audio(audio, filename_prefix, "output", self.FORMAT, quality, prompt, extra_pnginfo)}
        }


class SaveAudioMP3(SaveAudio):
    FORMAT = "mp3"
    SEARCH_ALIASES = ["export mp3"]

    @classmethod
    def INPUT_TYPES(cls):
        types = super().INPUT_TYPES()
        types["required"]["quality"] = MP3_QUALITY
        return types

    DESCRIPTION = "Saves the audio into the output folder as MP3 (V0: the best variable bit rate)."


class SaveAudioOpus(SaveAudio):
    FORMAT = "opus"
    SEARCH_ALIASES = ["export opus"]

    @classmethod
    def INPUT_TYPES(cls):
        types = super().INPUT_TYPES()
        types["required"]["quality"] = OPUS_QUALITY
        return types

    DESCRIPTION = (
        "Saves the audio into the output folder as Opus; rates Opus lacks are resampled to the next "
        "one it has (48 kHz at most)."
    )


class SaveAudioAdvanced:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": DynamicSection(
                {
                    "audio": ("AUDIO", {"tooltip": "The audio to save."}),
                    "filename_prefix": (
                        "STRING",
                        {
                            "default": "audio/ComfyUI",
                            "multiline": False,
                            "tooltip": "Start of the file name; may hold a subfolder and variables.",
                        },
                    ),
                    "format": dynamic_combo(
                        {"flac": {}, "mp3": {"quality": MP3_QUALITY}, "opus": {"quality": OPUS_QUALITY}},
                        tooltip="The file format (MP3 and Opus also take a quality).",
                    ),
                }
            ),
            "hidden": {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"},
        }

    RETURN_TYPES = ("AUDIO",)
    RETURN_NAMES = ("audio",)
    OUTPUT_TOOLTIPS = (None,)
    FUNCTION = "save"
    OUTPUT_NODE = True
    CATEGORY = "audio"
    SEARCH_ALIASES = ["save audio", "export audio", "output audio", "write audio", "flac", "mp3", "opus"]
    DESCRIPTION = "Saves the audio into the output folder as FLAC, MP3 or Opus, with the workflow in its tags."

    def save(
        self,
        audio: dict,
        filename_prefix: str,
        format: str,
        prompt: Any = None,
        extra_pnginfo: dict | None = None,
        **kwargs: Any,
    ):
        quality = combo_inputs(kwargs, "format").get("quality", "128k")
        results = save_audio(audio, filename_prefix, "output", format, quality, prompt, extra_pnginfo)
        return {"ui": {"audio": results}, "result": (audio,)}


class PreviewAudio:
    RELATIVE_PYTHON_MODULE = MODULE
    SEARCH_ALIASES = ["play audio"]

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"audio": ("AUDIO", {})}, "hidden": {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"}}

    RETURN_TYPES = ()
    FUNCTION = "preview_audio"
    OUTPUT_NODE = True
    CATEGORY = "audio"
    DESCRIPTION = "Plays the audio in the UI (written to the temp folder as FLAC)."

    def preview_audio(self, audio: dict, prompt: Any = None, extra_pnginfo: dict | None = None):
        prefix = "ComfyUI_temp_" + "".join(random.choice(PREVIEW_LETTERS) for _ in range(5))
        return {"ui": {"audio": save_audio(audio, prefix, "temp", "flac", "128k", prompt, extra_pnginfo)}}


def _validate_file(name: str) -> bool | str:
    try:
        ok = annotated_path(name).is_file()
    except ValueError:
        ok = False
    return True if ok else f"Invalid audio file: {name}"


class LoadAudio:
    RELATIVE_PYTHON_MODULE = MODULE
    SEARCH_ALIASES = ["import audio", "open audio", "audio file"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "audio": (
                    "COMBO",
                    {"audio_upload": True, "multiselect": False, "options": input_files(("audio", "video"))},
                )
            }
        }

    RETURN_TYPES = ("AUDIO",)
    FUNCTION = "load"
    CATEGORY = "audio"
    DESCRIPTION = "The first audio track of a file of the input folder (audio or video), as float samples."

    def load(self, audio: str):
        return (load_audio(annotated_path(audio)),)

    @classmethod
    def IS_CHANGED(cls, audio: str) -> str:
        return file_sha256(annotated_path(audio))

    @classmethod
    def VALIDATE_INPUTS(cls, audio: str) -> bool | str:
        return _validate_file(audio)


class RecordAudio(LoadAudio):
    """The web UI records in the browser and uploads the recording; the node then loads that file."""

    SEARCH_ALIASES = ["microphone input", "audio capture", "voice input"]

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"audio": ("AUDIO_RECORD", {})}}

    DESCRIPTION = "Audio recorded in the browser (the UI uploads the recording to the input folder)."


class TrimAudioDuration:
    RELATIVE_PYTHON_MODULE = MODULE
    SEARCH_ALIASES = ["cut audio", "audio clip", "shorten audio"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "audio": ("AUDIO", {}),
                "start_index": (
                    "FLOAT",
                    {
                        "default": 0.0,
                        "min": -0xFFFFFFFFFFFFFFFF,
                        "max": 0xFFFFFFFFFFFFFFFF,
                        "step": 0.01,
                        "tooltip": "Start in seconds; negative counts from the end.",
                    },
                ),
                "duration": ("FLOAT", {"default": 60.0, "min": 0.0, "step": 0.01, "tooltip": "Length in seconds."}),
            }
        }

    RETURN_TYPES = ("AUDIO",)
    FUNCTION = "trim"
    CATEGORY = "audio"
    DESCRIPTION = "The part of the audio from start_index for duration seconds."

    def trim(self, audio: dict, start_index: float, duration: float):
        waveform, rate = check_audio(audio)
        length = waveform.shape[-1]
        start = round(start_index * rate) + (length if start_index < 0 else 0)
        start = max(0, min(start, length - 1))
        end = max(0, min(start + round(duration * rate), length))
        if start >= end:
            raise ValueError(
                f"TrimAudioDuration: the range starts at {start_index} s for {duration} s, which holds "
                f"no sample of this {length / rate:.3f} s audio"
            )
        return ({"waveform": waveform[..., start:end], "sample_rate": rate},)


def _same_rate(first: dict, second: dict) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Both waveforms at the higher of their two sample rates (ComfyUI resamples the other one up)."""
    (a, rate_a), (b, rate_b) = check_audio(first, "audio1"), check_audio(second, "audio2")
    rate = max(rate_a, rate_b)
    return resample(a, rate_a, rate), resample(b, rate_b, rate), rate


class SplitAudioChannels:
    RELATIVE_PYTHON_MODULE = MODULE
    SEARCH_ALIASES = ["stereo to mono"]

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"audio": ("AUDIO", {})}}

    RETURN_TYPES = ("AUDIO", "AUDIO")
    RETURN_NAMES = ("left", "right")
    FUNCTION = "separate"
    CATEGORY = "audio"
    DESCRIPTION = "The left and right channels of stereo audio, each as mono audio."

    def separate(self, audio: dict):
        waveform, rate = check_audio(audio)
        if waveform.shape[1] != 2:
            raise ValueError(f"SplitAudioChannels: the audio has {waveform.shape[1]} channel(s), not two")
        return (
            {"waveform": waveform[:, 0:1], "sample_rate": rate},
            {"waveform": waveform[:, 1:2], "sample_rate": rate},
        )


class JoinAudioChannels:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"audio_left": ("AUDIO", {}), "audio_right": ("AUDIO", {})}}

    RETURN_TYPES = ("AUDIO",)
    RETURN_NAMES = ("audio",)
    FUNCTION = "join"
    CATEGORY = "audio"
    DESCRIPTION = "Stereo audio of two mono ones (the higher sample rate, the shorter length)."

    def join(self, audio_left: dict, audio_right: dict):
        for name, value in (("audio_left", audio_left), ("audio_right", audio_right)):
            if check_audio(value, name)[0].shape[1] != 1:
                raise ValueError(f"JoinAudioChannels: {name} must be mono")
        left, right, rate = _same_rate(audio_left, audio_right)
        length = min(left.shape[-1], right.shape[-1])
        return ({"waveform": torch.cat([left[..., :length], right[..., :length]], dim=1), "sample_rate": rate},)


class AudioConcat:
    RELATIVE_PYTHON_MODULE = MODULE
    SEARCH_ALIASES = ["join audio", "combine audio", "append audio"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "audio1": ("AUDIO", {}),
                "audio2": ("AUDIO", {}),
                "direction": (
                    "COMBO",
                    {
                        "default": "after",
                        "multiselect": False,
                        "options": ["after", "before"],
                        "tooltip": "Whether audio2 goes after or before audio1.",
                    },
                ),
            }
        }

    RETURN_TYPES = ("AUDIO",)
    FUNCTION = "concat"
    CATEGORY = "audio"
    DESCRIPTION = "audio2 after (or before) audio1; mono becomes stereo, the lower sample rate is raised."

    def concat(self, audio1: dict, audio2: dict, direction: str):
        if direction not in ("after", "before"):
            raise ValueError(f"direction: {direction!r} is not one of after, before")
        first, second, rate = _same_rate(audio1, audio2)
        first, second = (w.repeat(1, 2, 1) if w.shape[1] == 1 else w for w in (first, second))
        parts = (first, second) if direction == "after" else (second, first)
        return ({"waveform": torch.cat(parts, dim=2), "sample_rate": rate},)


class AudioMerge:
    RELATIVE_PYTHON_MODULE = MODULE
    SEARCH_ALIASES = ["mix audio", "overlay audio", "layer audio"]
    METHODS = {
        "add": lambda a, b: a + b,
        "mean": lambda a, b: (a + b) / 2,
        "subtract": lambda a, b: a - b,
        "multiply": lambda a, b: a * b,
    }

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "audio1": ("AUDIO", {}),
                "audio2": ("AUDIO", {}),
                "merge_method": (
                    "COMBO",
                    {"multiselect": False, "options": list(cls.METHODS), "tooltip": "How the two waveforms combine."},
                ),
            }
        }

    RETURN_TYPES = ("AUDIO",)
    FUNCTION = "merge"
    CATEGORY = "audio"
    DESCRIPTION = "The two waveforms combined sample by sample over audio1's length, scaled back into -1..1."

    def merge(self, audio1: dict, audio2: dict, merge_method: str):
        if merge_method not in self.METHODS:
            raise ValueError(f"merge_method: {merge_method!r} is not one of {', '.join(self.METHODS)}")
        first, second, rate = _same_rate(audio1, audio2)
        length = first.shape[-1]
        second = torch.nn.functional.pad(second[..., :length], (0, max(0, length - second.shape[-1])))
        waveform = self.METHODS[merge_method](first, second)
        peak = waveform.abs().max()
        return ({"waveform": waveform / peak if peak > 1.0 else waveform, "sample_rate": rate},)


class AudioAdjustVolume:
    RELATIVE_PYTHON_MODULE = MODULE
    SEARCH_ALIASES = ["audio gain", "loudness", "audio level"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "audio": ("AUDIO", {}),
                "volume": (
                    "INT",
                    {
                        "default": 1,
                        "min": -100,
                        "max": 100,
                        "tooltip": "Change in decibels: +6 about doubles, -6 halves.",
                    },
                ),
            }
        }

    RETURN_TYPES = ("AUDIO",)
    FUNCTION = "adjust_volume"
    CATEGORY = "audio"
    DESCRIPTION = "The audio louder or quieter by a number of decibels."

    def adjust_volume(self, audio: dict, volume: int):
        waveform, rate = check_audio(audio)
        if volume == 0:
            return (audio,)
        return ({"waveform": waveform * 10 ** (volume / 20), "sample_rate": rate},)


class EmptyAudio:
    RELATIVE_PYTHON_MODULE = MODULE
    SEARCH_ALIASES = ["blank audio"]

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "duration": (
                    "FLOAT",
                    {
                        "default": 60.0,
                        "min": 0.0,
                        "max": 0xFFFFFFFFFFFFFFFF,
                        "step": 0.01,
                        "tooltip": "Length in seconds.",
                    },
                ),
                "sample_rate": ("INT", {"default": 44100, "min": 1, "max": 192000, "tooltip": "Samples per second."}),
                "channels": ("INT", {"default": 2, "min": 1, "max": 2, "tooltip": "1 mono, 2 stereo."}),
            }
        }

    RETURN_TYPES = ("AUDIO",)
    FUNCTION = "create_empty_audio"
    CATEGORY = "audio"
    DESCRIPTION = "Silence of the given length, sample rate and channels."

    def create_empty_audio(self, duration: float, sample_rate: int, channels: int):
        return ({"waveform": torch.zeros(1, channels, round(duration * sample_rate)), "sample_rate": sample_rate},)


class EmptyLatentAudio:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "seconds": ("FLOAT", {"default": 47.6, "min": 1.0, "max": 1000.0, "step": 0.1}),
                "batch_size": (
                    "INT",
                    {"default": 1, "min": 1, "max": 4096, "tooltip": "The number of latent images in the batch."},
                ),
            }
        }

    RETURN_TYPES = ("LATENT",)
    FUNCTION = "generate"
    CATEGORY = "latent/audio"
    DESCRIPTION = "An empty latent for Stable Audio's VAE: 64 channels, one step per 2048 samples at 44.1 kHz."

    def generate(self, seconds: float, batch_size: int):
        # an even number of latent steps, as ComfyUI rounds it
        length = round(seconds * LATENT_RATE / LATENT_HOP / 2) * 2
        return ({"samples": torch.zeros(batch_size, LATENT_CHANNELS, length), "type": "audio"},)


NODE_CLASS_MAPPINGS = {
    "EmptyLatentAudio": EmptyLatentAudio,
    "SaveAudio": SaveAudio,
    "SaveAudioMP3": SaveAudioMP3,
    "SaveAudioOpus": SaveAudioOpus,
    "LoadAudio": LoadAudio,
    "SaveAudioAdvanced": SaveAudioAdvanced,
    "PreviewAudio": PreviewAudio,
    "RecordAudio": RecordAudio,
    "TrimAudioDuration": TrimAudioDuration,
    "SplitAudioChannels": SplitAudioChannels,
    "JoinAudioChannels": JoinAudioChannels,
    "AudioConcat": AudioConcat,
    "AudioMerge": AudioMerge,
    "AudioAdjustVolume": AudioAdjustVolume,
    "EmptyAudio": EmptyAudio,
}

NODE_DISPLAY_NAME_MAPPINGS = {
    "EmptyLatentAudio": "Empty Latent Audio",
    "SaveAudio": "Save Audio (FLAC)",
    "SaveAudioMP3": "Save Audio (MP3)",
    "SaveAudioOpus": "Save Audio (Opus)",
    "LoadAudio": "Load Audio",
    "SaveAudioAdvanced": "Save Audio (Advanced)",
    "PreviewAudio": "Preview Audio",
    "RecordAudio": "Record Audio",
    "TrimAudioDuration": "Trim Audio Duration",
    "SplitAudioChannels": "Split Audio Channels",
    "JoinAudioChannels": "Join Audio Channels",
    "AudioConcat": "Audio Concat",
    "AudioMerge": "Audio Merge",
    "AudioAdjustVolume": "Audio Adjust Volume",
    "EmptyAudio": "Empty Audio",
}
