"""MiniMax H3 as the engine sees it: the DiffusionModel one denoise step evaluates and the video VAE component
behind VAEEncode/VAEDecode, on the model code of nodes.models.minimax_h3 and minimax_h3_vae.

The sampler's latent is the video latent [B, 24, T, H/16, W/16] in model space (ComfyUI's MiniMaxH3AV format
is the VAE's own normalisation, so no further scaling). ComfyUI samples the video and the audio latent together
as one NestedTensor; here the audio stream is not sampled: every evaluation sees the silent audio latent
EmptyMiniMaxH3LatentAV starts from (zeros of the clip's 40 Hz length). The video prediction is therefore the
model's given that audio, not ComfyUI's joint-sampling one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models import minimax_h3 as mh
from nodes.models import minimax_h3_vae as mvae
from nodes.models.components import VAE, DiffusionModel
from nodes.models.minimax_h3_shapes import (
    AUDIO_CHANNELS,
    AUDIO_LATENTS_PER_SECOND,
    AUDIO_STEREO,
    FPS,
    MINIMAX_SHIFTS,
    SPATIAL_RATIO,
)

ARCH = "minimax_h3"


def pixel_frames(latent_t: int) -> int:
    """The pixel frames a video latent of `latent_t` frames decodes to (1, then 4 per latent frame, 17 a clip)."""
    return sum(mh.FRAME_PER_TOKEN[k % len(mh.FRAME_PER_TOKEN)] for k in range(latent_t))


def silent_audio(latent_t: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The empty audio latent [1, 32, 2, A] of a video latent's duration (EmptyMiniMaxH3LatentAV's)."""
    audio_t = round(pixel_frames(latent_t) / FPS * AUDIO_LATENTS_PER_SECOND)
    return torch.zeros(1, AUDIO_CHANNELS, AUDIO_STEREO, audio_t, dtype=dtype)


@dataclass
class MiniMaxH3DiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        """ComfyUI's negated video velocity for x [B, 24, T, H, W] at timestep sigma x multiplier, each batch
        member one packed evaluation (the packing is per sample)."""
        if cond.get("control"):
            raise NotImplementedError("ControlNets are not supported for MiniMax H3 models")
        if x.dim() != 5:
            raise ValueError(f"MiniMax H3 takes [B,C,T,H,W] video latents, got {tuple(x.shape)}")
        context = cond.get("context")
        if context is None:
            raise ValueError("MiniMax H3 needs text conditioning (the minimax text encoder's states)")
        t = torch.as_tensor(timestep, dtype=torch.float64).reshape(-1)
        sigmas = (
            (t / float(self.sampling.get("multiplier", 1.0))).expand(x.shape[0])
            if t.numel() == 1
            else t / float(self.sampling.get("multiplier", 1.0))
        )
        audio = silent_audio(x.shape[2], x.dtype).to(x.device)
        shifts = (
            float(cond.get(MINIMAX_SHIFTS[0], mh.SIGMA_SHIFT_VIDEO)),
            float(cond.get(MINIMAX_SHIFTS[1], mh.SIGMA_SHIFT_AUDIO)),
        )
        outs = []
        for b in range(x.shape[0]):
            ctx = context[b % context.shape[0]][None]
            video, _ = mh.apply(self.module, x[b : b + 1], audio, ctx, float(sigmas[b]), shifts=shifts)
            outs.append(video)
        return torch.cat(outs).float()


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> MiniMaxH3DiffusionModel:
    """The MiniMax H3 transformer of a published single file (full or curve form), float32 as on a CPU."""
    if ref.patches:
        raise NotImplementedError("LoRAs on MiniMax H3 models are not supported yet")
    path = ref.sources[0] if ref.sources else None
    module = mh.load_transformer(state_dict, path)
    return MiniMaxH3DiffusionModel(
        arch=ARCH,
        module=module,
        latent_format=latent_format(ARCH),
        sampling=dict(sampling_config(ARCH)),
        config=dict(module.config),
    )


class MiniMaxH3VideoVAE(VAE):
    """ComfyUI's MiniMax H3 video VAE: one image encodes alone (a keyframe), a batch of 17k+5 images as the frames
    of one video; latents decode to their 17k+5 frames."""

    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        if pixels.dim() != 4:
            raise ValueError(f"the MiniMax H3 VAE encodes IMAGE [B,H,W,C], got {tuple(pixels.shape)}")
        if pixels.shape[1] % SPATIAL_RATIO or pixels.shape[2] % SPATIAL_RATIO:
            raise ValueError(
                f"the MiniMax H3 VAE encodes sides that are multiples of {SPATIAL_RATIO}, got "
                f"{pixels.shape[2]}x{pixels.shape[1]}"
            )
        if pixels.shape[0] == 1:
            return mvae.encode_image(self.module, pixels)
        return mvae.encode(self.module, pixels)

    def encode_video(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.encode(pixels)

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """[B, 24, 5k+2, h, w] -> IMAGE [B*(17k+5), 16h, 16w, 3]."""
        if latent.dim() != 5 or latent.shape[1] != self.latent_channels:
            raise ValueError(
                f"the MiniMax H3 VAE decodes [B,{self.latent_channels},T,H,W] latents, got {tuple(latent.shape)}"
            )
        return torch.cat([mvae.decode(self.module, latent[b : b + 1]) for b in range(latent.shape[0])])


def load_vae(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> MiniMaxH3VideoVAE:
    path = ref.sources[0] if ref.sources else None
    module = mvae.load_vae(state_dict, path)
    return MiniMaxH3VideoVAE(
        arch=ARCH, module=module, latent_channels=int(module.config.latent_channels), downscale=SPATIAL_RATIO
    )


# The loader (nodes.models.loader) finds every MiniMax H3 entry point on this module.
from nodes.models.minimax_h3_text import load_text_encoder  # noqa: E402

__all__ = [
    "MiniMaxH3DiffusionModel",
    "MiniMaxH3VideoVAE",
    "load_diffusion_model",
    "load_text_encoder",
    "load_vae",
    "silent_audio",
]
