"""Wan 2.2 sound-to-video's nodes (ComfyUI's comfy_extras.nodes_audio_encoder and nodes_wan, interfaces as in 0.3.64
and today's; written from their definitions): AudioEncoderLoader, AudioEncoderEncode, WanSoundImageToVideo and
WanSoundImageToVideoExtend.

The audio encoder's every layer (wav2vec 2.0 at 50 frames a second) is resampled linearly to 30 frames a second and
read at 16 video frames a second (the nearest 30 fps frame of each, zeros past the audio's end) into a bucket of
whole clips; a clip takes its `length` rounded up to whole latent frames (4 audio frames per latent frame) from
`frame_offset` on. The negative gets the same features times zero. The reference image is one latent frame
appended to both conds' reference latents; the previous clip's motion is the last 19 latent frames of
`ref_motion` (its last 73 images, grey 0.5 in front) or, in the Extend node, of the video latent so far, which also
sets the audio offset. The control video's latent (or, without one, the latent format's zero point) rides both
conds. The S2V network reads them (nodes.models.wan_s2v).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from cluster.refs import ModelRef
from nodes.arch import latent_format
from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.inputs import require_ref
from nodes.ksampler import call_model_fn
from nodes.library.wan import encode_video, fit_frames, latent_frames
from nodes.loaders import make_ref, model_file, model_files
from nodes.video_inputs import video_inputs, video_length

COMPONENT = "audio_encoder"
AUDIO_FPS = 50  # wav2vec 2.0's frames per second
RESAMPLED_FPS = 30  # the rate the features are interpolated to (ComfyUI's video_rate)
VIDEO_FPS = 16  # Wan's frame rate
MOTION_IMAGES = 73  # ref_motion: the last images kept (19 latent frames)
MOTION_LATENTS = 19


class AudioEncoderOutput(dict):
    """ComfyUI's AUDIO_ENCODER_OUTPUT: encoded_audio, encoded_audio_all_layers (a tuple) and audio_samples."""


def _audio_encoder_file(name: str):
    from nodes.models.audio_encoder import is_audio_encoder
    from nodes.models.errors import ModelLoadError
    from nodes.models.safetensors_io import shapes_of

    path = model_file("audio_encoders", name, "audio_encoder_name")
    try:
        keys = shapes_of(path)[0]
    except ModelLoadError as e:
        raise ValueError(f"audio_encoder_name: {e}") from e
    if not is_audio_encoder(keys):
        raise ValueError(
            f"audio_encoder_name: {path.name!r} is not an audio encoder Comfy Cluster can run "
            "(supported: wav2vec 2.0, Whisper)"
        )
    return path


class AudioEncoderLoader:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_audio_encoder"
    FUNCTION = "execute"
    CATEGORY = "loaders"
    RETURN_TYPES = ("AUDIO_ENCODER",)
    RETURN_NAMES = ("AUDIO_ENCODER",)
    DESCRIPTION = "Loads an audio encoder (wav2vec 2.0, or Whisper for HuMo) from models/audio_encoders."

    @classmethod
    def INPUT_TYPES(cls):
        files = model_files("audio_encoders")
        return {"required": {"audio_encoder_name": ("COMBO", {"multiselect": False, "options": files})}}

    def execute(self, audio_encoder_name: str) -> tuple[ModelRef]:
        from nodes.models.audio_encoder import WHISPER_MARKER
        from nodes.models.safetensors_io import shapes_of

        path = _audio_encoder_file(audio_encoder_name)
        arch = "whisper3" if WHISPER_MARKER in shapes_of(path)[0] else "wav2vec2"
        return (make_ref(COMPONENT, arch, [path]),)


class AudioEncoderEncode:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_audio_encoder"
    FUNCTION = "execute"
    CATEGORY = "conditioning"
    RETURN_TYPES = ("AUDIO_ENCODER_OUTPUT",)
    RETURN_NAMES = ("AUDIO_ENCODER_OUTPUT",)
    DESCRIPTION = "Encodes audio with an audio encoder: its last hidden state and every layer's, at 16 kHz."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"audio_encoder": ("AUDIO_ENCODER", {}), "audio": ("AUDIO", {})}}

    async def execute(self, audio_encoder: ModelRef, audio: dict) -> tuple[AudioEncoderOutput]:
        from nodes.models.audio_encoder import SAMPLE_RATE
        from nodes.models.audio_mel import resample

        require_ref(audio_encoder, COMPONENT, "audio_encoder", "AUDIO_ENCODER")
        waveform = audio.get("waveform") if isinstance(audio, dict) else None
        if not isinstance(waveform, torch.Tensor) or waveform.ndim != 3 or "sample_rate" not in audio:
            raise ValueError("audio: expected an AUDIO (a [batch, channels, samples] waveform with its sample_rate)")
        # torchaudio's default resampler, our own code (nodes.models.audio_mel); 16 kHz input passes unchanged
        waveform = resample(waveform.float(), int(audio["sample_rate"]), SAMPLE_RATE)
        out = await call_model_fn(
            "audio_encode", audio_encoder, "audio_encoder", {"waveform": waveform.contiguous()}, {}
        )
        layers = tuple(out["all_layers"].unbind(0))
        return (
            AudioEncoderOutput(
                encoded_audio=out["encoded"], encoded_audio_all_layers=layers, audio_samples=waveform.shape[2]
            ),
        )


def features_at_rate(features: torch.Tensor, rate: int, target: int) -> torch.Tensor:
    """[layers, frames, width] at `rate` frames a second -> int(seconds x target) frames (linear, corners kept)."""
    length = int(features.shape[1] / float(rate) * target)
    out = torch.nn.functional.interpolate(features.transpose(1, 2), size=length, align_corners=True, mode="linear")
    return out.transpose(1, 2)


def audio_bucket(features: torch.Tensor, clip_frames: int) -> torch.Tensor:
    """[layers, frames at 30 fps, width] -> [1, layers, width, frames at 16 fps]: as many whole clips of `clip_frames`
    as cover the audio, each video frame the nearest 30 fps frame (rounded half to even), zeros past the end."""
    layers, frames, width = features.shape
    clips = int(frames / (clip_frames * RESAMPLED_FPS / VIDEO_FPS)) + 1
    count = clips * clip_frames
    total = math.ceil(count / VIDEO_FPS * RESAMPLED_FPS)
    duration = count / VIDEO_FPS
    if duration > total / RESAMPLED_FPS:
        raise ValueError("the audio bucket is longer than the padded audio")
    times = np.linspace(0, duration, count, endpoint=False)
    index = np.clip(np.round(times * RESAMPLED_FPS).astype(int), 0, total - 1)
    rows = [features[:, int(i)] if i < frames else torch.zeros(layers, width, device=features.device) for i in index]
    return torch.stack(rows).unsqueeze(0).permute(0, 2, 3, 1)


async def sound_to_video(
    positive: list,
    negative: list,
    vae: Any,
    width: int,
    height: int,
    length: int,
    batch_size: int,
    frame_offset: int = 0,
    ref_image: torch.Tensor | None = None,
    audio_encoder_output: dict | None = None,
    control_video: torch.Tensor | None = None,
    ref_motion: torch.Tensor | None = None,
    ref_motion_latent: torch.Tensor | None = None,
) -> tuple[list, list, dict]:
    """Both S2V nodes' conditioning (see the module docstring)."""
    positive, negative = require(positive, "positive"), require(negative, "negative")
    frames = latent_frames(length)
    if audio_encoder_output is not None:
        layers = audio_encoder_output["encoded_audio_all_layers"]
        features = features_at_rate(torch.cat(list(layers)).float(), AUDIO_FPS, RESAMPLED_FPS)
        clip = frames * 4
        bucket = audio_bucket(features, clip)[..., frame_offset : frame_offset + clip]
        if bucket.shape[3] > 0:
            positive = set_values(positive, {"audio_embed": bucket})
            negative = set_values(negative, {"audio_embed": bucket * 0.0})
    if ref_image is not None:
        ref = await encode_video(vae, fit_frames(ref_image[:1], width, height))
        positive, negative = (
            [[c, {**o, "reference_latents": [*o.get("reference_latents", []), ref]}] for c, o in side]
            for side in (positive, negative)
        )
    if ref_motion is not None:
        ref_motion = fit_frames(ref_motion[-MOTION_IMAGES:], width, height)
        if ref_motion.shape[0] < MOTION_IMAGES:
            grey = torch.full((MOTION_IMAGES, height, width, 3), 0.5)
            grey[-ref_motion.shape[0] :] = ref_motion[..., :3]
            ref_motion = grey
        ref_motion_latent = await encode_video(vae, ref_motion)
    if ref_motion_latent is not None:
        motion = ref_motion_latent[:, :, -MOTION_LATENTS:]
        positive, negative = (
            set_values(positive, {"reference_motion": motion}),
            set_values(negative, {"reference_motion": motion}),
        )
    latent = torch.zeros(batch_size, 16, frames, height // 8, width // 8)
    control = latent_format("wan21").process_out(torch.zeros_like(latent))
    if control_video is not None:
        encoded = await encode_video(vae, fit_frames(control_video[:length], width, height))
        control[:, :, : encoded.shape[2]] = encoded
    positive, negative = (
        set_values(positive, {"control_video": control}),
        set_values(negative, {"control_video": control}),
    )
    return positive, negative, {"samples": latent}


class WanSoundImageToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_wan"
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    DESCRIPTION = "Conditions a Wan 2.2 S2V model on audio features, a reference image and optional motion."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                **video_inputs(length=77),
            },
            "optional": {
                "audio_encoder_output": ("AUDIO_ENCODER_OUTPUT", {}),
                "ref_image": ("IMAGE", {}),
                "control_video": ("IMAGE", {}),
                "ref_motion": ("IMAGE", {}),
            },
        }

    async def execute(
        self,
        positive,
        negative,
        vae,
        width: int,
        height: int,
        length: int,
        batch_size: int,
        ref_image=None,
        audio_encoder_output=None,
        control_video=None,
        ref_motion=None,
    ):
        return await sound_to_video(
            positive,
            negative,
            vae,
            width,
            height,
            length,
            batch_size,
            ref_image=ref_image,
            audio_encoder_output=audio_encoder_output,
            control_video=control_video,
            ref_motion=ref_motion,
        )


class WanSoundImageToVideoExtend:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_wan"
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    DESCRIPTION = "Conditions the next clip of a Wan 2.2 S2V video: its audio from where the video latent ends."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "positive": ("CONDITIONING", {}),
                "negative": ("CONDITIONING", {}),
                "vae": ("VAE", {}),
                "length": video_length(77),
                "video_latent": ("LATENT", {}),
            },
            "optional": {
                "audio_encoder_output": ("AUDIO_ENCODER_OUTPUT", {}),
                "ref_image": ("IMAGE", {}),
                "control_video": ("IMAGE", {}),
            },
        }

    async def execute(
        self,
        positive,
        negative,
        vae,
        length: int,
        video_latent: dict,
        ref_image=None,
        audio_encoder_output=None,
        control_video=None,
    ):
        samples = video_latent["samples"]
        return await sound_to_video(
            positive,
            negative,
            vae,
            samples.shape[-1] * 8,
            samples.shape[-2] * 8,
            length,
            samples.shape[0],
            frame_offset=samples.shape[-3] * 4,
            ref_image=ref_image,
            audio_encoder_output=audio_encoder_output,
            control_video=control_video,
            ref_motion_latent=samples,
        )


NODE_CLASS_MAPPINGS = {
    cls.__name__: cls
    for cls in (AudioEncoderLoader, AudioEncoderEncode, WanSoundImageToVideo, WanSoundImageToVideoExtend)
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}  # ComfyUI gives them no display names
