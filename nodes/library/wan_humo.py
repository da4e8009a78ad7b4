"""Wan HuMo's conditioning node (ComfyUI 0.3.64's comfy_extras.nodes_wan WanHuMoImageToVideo; interface as there,
written from its definition): the empty video latent, the reference image's latent and the audio windows the HuMo
network reads (nodes.models.wan_humo).

The audio: the Whisper encoder's 33 hidden states (50 frames a second) of the first waveform, cut to the audio's
length (two frames per 640 samples), averaged in four groups of 8 layers plus the last one, resampled linearly to
25 frames a second; each latent frame gets a window of 8 of those frames: the first latent frame three zero rows
and frames -2..2 around video frame 0, every later one frames 4k-5..4k+2 (k: its index), zeros outside the audio.
The negative gets zeros. Without audio both get ComfyUI's zeros (one more window than latent frames, 1280 wide).
The reference image (its first frame resized to width x height, bilinear, centre crop) is encoded and appended to
the positive's reference latents, zeros of its shape to the negative's; without one both get a zero latent frame."""

from __future__ import annotations

from typing import Any

import torch

from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.library.wan import encode_video, fit_frames, latent_frames
from nodes.library.wan_s2v import features_at_rate
from nodes.video_inputs import video_inputs

WHISPER_FPS, HUMO_FPS = 50, 25
SAMPLES_PER_FRAME_PAIR = 640  # 16 kHz samples per two Whisper frames
LAYER_GROUPS = ((0, 8), (8, 16), (16, 24), (24, 32), (32, 33))
WINDOW, LEAD = 8, 3  # audio rows per latent frame; zero rows before the first latent frame's five
FEATURE_WIDTH = 1280  # ComfyUI's zeros without audio: whisper-large-v3's width


def audio_windows(features: torch.Tensor, length: int) -> torch.Tensor:
    """[frames at 25 fps, groups, width] -> [latent frames, 8, groups, width] (see the module docstring)."""
    count = latent_frames(length)
    rows = [[None] * LEAD + list(range(-2, 3))]
    rows += [list(range(4 * k - 5, 4 * k + 3)) for k in range(1, count)]
    index = torch.tensor([[-1 if i is None or i < 0 else i for i in row] for row in rows])
    valid = (index >= 0) & (index < features.shape[0])
    picked = features[index.clamp(0, max(features.shape[0] - 1, 0))] if features.shape[0] else None
    out = torch.zeros(count, WINDOW, *features.shape[1:], dtype=features.dtype)
    if picked is not None:
        out[valid] = picked[valid]
    return out


def humo_audio(audio_encoder_output: dict, length: int) -> torch.Tensor:
    """[1, latent frames, 8, 5, width]: the encoder output's windows (see the module docstring)."""
    layers = torch.stack(list(audio_encoder_output["encoded_audio_all_layers"]), dim=2).float()  # [B, T, 33, C]
    if layers.shape[2] < LAYER_GROUPS[-1][1]:
        raise ValueError(
            f"audio_encoder_output: HuMo reads 33 hidden states (a Whisper large-v3 encoder's), got {layers.shape[2]}"
        )
    frames = int(audio_encoder_output["audio_samples"]) // SAMPLES_PER_FRAME_PAIR * 2
    layers = layers[0, :frames]
    groups = torch.stack([layers[:, a:b].mean(dim=1) for a, b in LAYER_GROUPS])  # [5, T, C]
    features = features_at_rate(groups, WHISPER_FPS, HUMO_FPS).transpose(0, 1)  # [T', 5, C]
    return audio_windows(features, length).unsqueeze(0)


class WanHuMoImageToVideo:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_wan"
    FUNCTION = "execute"
    CATEGORY = "conditioning/video_models"
    EXPERIMENTAL = True
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING", "LATENT")
    RETURN_NAMES = ("positive", "negative", "latent")
    DESCRIPTION = "Conditions a Wan HuMo model on Whisper audio features and a reference image of the subject."

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                **video_inputs(length=97),
            },
            "optional": {"audio_encoder_output": ("AUDIO_ENCODER_OUTPUT", {}), "ref_image": ("IMAGE", {})},
        }

    async def execute(
        self,
        positive: list,
        negative: list,
        vae: Any,
        width: int,
        height: int,
        length: int,
        batch_size: int,
        ref_image: torch.Tensor | None = None,
        audio_encoder_output: dict | None = None,
    ) -> tuple[list, list, dict]:
        positive, negative = require(positive, "positive"), require(negative, "negative")
        frames = latent_frames(length)
        latent = torch.zeros(batch_size, 16, frames, height // 8, width // 8)
        if ref_image is not None:
            ref = await encode_video(vae, fit_frames(ref_image[:1], width, height))
            refs = (ref, torch.zeros_like(ref))
        else:
            refs = (torch.zeros(batch_size, 16, 1, height // 8, width // 8),) * 2
        positive, negative = (
            [[c, {**o, "reference_latents": [*o.get("reference_latents", []), r]}] for c, o in side]
            for side, r in zip((positive, negative), refs, strict=True)
        )
        if audio_encoder_output is not None:
            audio = humo_audio(audio_encoder_output, length)
            positive, negative = (
                set_values(positive, {"audio_embed": audio}),
                set_values(negative, {"audio_embed": torch.zeros_like(audio)}),
            )
        else:
            zeros = torch.zeros(batch_size, frames + 1, WINDOW, len(LAYER_GROUPS), FEATURE_WIDTH)
            positive, negative = (
                set_values(positive, {"audio_embed": zeros}),
                set_values(negative, {"audio_embed": zeros}),
            )
        return positive, negative, {"samples": latent}


NODE_CLASS_MAPPINGS = {"WanHuMoImageToVideo": WanHuMoImageToVideo}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
