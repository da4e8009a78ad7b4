"""MiniMax H3 as the engine sees it: the DiffusionModel one denoise step evaluates and the video VAE component
behind VAEEncode/VAEDecode, on the model code of nodes.models.minimax_h3 and minimax_h3_vae.

ComfyUI samples the video and the audio latent together (one NestedTensor; here packed side by side in one
[B, 1, N] tensor with their `latent_shapes`, as nodes.ksampler packs LTX-2's). The audio stream has its own
schedule (shift 3 where the video's is 12) while the sampler steps along the video sigma, so the sampler carries
the audio as y = a * sigma_v / sigma_a (ComfyUI's ModelSamplingAV audio carry): y is then an ordinary flow in
sigma_v whose clean end is `audio_scale` x a0 (audio_scale = shift_video / shift_audio), and each evaluation turns
y back into the stream's own latent a, runs the network and returns the velocity of y. `to_carried` and
`from_carried` convert a clean or partly noised audio latent into and out of the carried variable at the ends
of sampling. A plain 5-D video latent (no audio part) is evaluated beside the silent audio latent, as before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models import minimax_h3 as mh
from nodes.models import minimax_h3_vae as mvae
from nodes.models.components import DiffusionModel, VAEModel
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


def sampling_shifts(config: Mapping[str, Any]) -> tuple[float, float]:
    """The video and audio shifts of a model's sampling settings (MiniMaxH3SigmaShift's, else 12 and 3)."""
    return (
        float(config.get(MINIMAX_SHIFTS[0], mh.SIGMA_SHIFT_VIDEO)),
        float(config.get(MINIMAX_SHIFTS[1], mh.SIGMA_SHIFT_AUDIO)),
    )


def audio_scale(shifts: tuple[float, float]) -> float:
    return float(shifts[0]) / float(shifts[1])


def carry_ratio(sigma_v: float, shifts: tuple[float, float]) -> float:
    """a / y at video sigma sigma_v: sigma_a / sigma_v, tending to 1 / audio_scale as sigma_v -> 0."""
    if sigma_v <= 0.0:
        return 1.0 / audio_scale(shifts)
    return mh.time_shift_sigma(sigma_v, *shifts) / sigma_v


def to_carried(audio: torch.Tensor, sigma_v: float, shifts: tuple[float, float]) -> torch.Tensor:
    """The audio latent at video sigma sigma_v (a clean one at 0) as the variable the sampler carries."""
    return audio / carry_ratio(sigma_v, shifts)


def from_carried(carried: torch.Tensor, sigma_v: float, shifts: tuple[float, float]) -> torch.Tensor:
    return carried * carry_ratio(sigma_v, shifts)


def unpack(x: torch.Tensor, shapes: list[tuple[int, ...]]) -> list[torch.Tensor]:
    """[B, 1, N] -> the parts of `latent_shapes` (each [B, ...])."""
    parts, start = [], 0
    for shape in shapes:
        n = math.prod(shape[1:])
        parts.append(x[:, 0, start : start + n].reshape(x.shape[0], *shape[1:]))
        start += n
    if start != x.shape[-1]:
        raise ValueError(f"MiniMax H3: latent_shapes {shapes} do not cover the packed latent {tuple(x.shape)}")
    return parts


def pack(parts: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([p.reshape(p.shape[0], 1, -1) for p in parts], dim=-1)


@dataclass
class MiniMaxH3DiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        """ComfyUI's negated video velocity for x [B, 24, T, H, W] at timestep sigma x multiplier, each batch
        member one packed evaluation (the packing is per sample)."""
        if cond.get("control"):
            raise NotImplementedError("ControlNets are not supported for MiniMax H3 models")
        shapes = cond.get("latent_shapes")
        if shapes is not None:
            return self._apply_av(x, timestep, cond, [tuple(s) for s in shapes])
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
            video, _ = mh.apply(
                self.module, x[b : b + 1], audio, ctx, float(sigmas[b]), shifts=shifts, **_member_conditions(cond, b)
            )
            outs.append(video)
        return torch.cat(outs).float()

    def _apply_av(
        self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any], shapes: list[tuple[int, ...]]
    ) -> torch.Tensor:
        """One joint evaluation of the packed video and carried audio latents: the packed negated velocities (the
        audio's that of the carried variable, so that denoised = y - sigma_v * out is audio_scale x the
        stream's own x0 prediction)."""
        if len(shapes) != 2 or len(shapes[0]) != 5 or len(shapes[1]) != 4:
            raise ValueError(f"MiniMax H3 samples a video and an audio latent together, got parts {shapes}")
        context = cond.get("context")
        if context is None:
            raise ValueError("MiniMax H3 needs text conditioning (the minimax text encoder's states)")
        video, carried = unpack(x, shapes)
        shifts = (
            float(cond.get(MINIMAX_SHIFTS[0], mh.SIGMA_SHIFT_VIDEO)),
            float(cond.get(MINIMAX_SHIFTS[1], mh.SIGMA_SHIFT_AUDIO)),
        )
        scale = audio_scale(shifts)
        t = torch.as_tensor(timestep, dtype=torch.float64).reshape(-1)
        sigmas = t.expand(x.shape[0]) if t.numel() == 1 else t
        sigmas = sigmas / float(self.sampling.get("multiplier", 1.0))
        outs = []
        for b in range(x.shape[0]):
            sigma_v = max(float(sigmas[b]), 1e-6)
            sigma_a = mh.time_shift_sigma(sigma_v, *shifts)
            y = carried[b : b + 1].float()
            a = from_carried(y, sigma_v, shifts)
            ctx = context[b % context.shape[0]][None]
            out_v, out_a = mh.apply(
                self.module, video[b : b + 1], a, ctx, sigma_v, shifts=shifts, **_member_conditions(cond, b)
            )
            x0_a = a - sigma_a * out_a.float()
            out_y = (y - scale * x0_a) / sigma_v
            outs.append(pack([out_v.float(), out_y]))
        return torch.cat(outs)


def _member_conditions(cond: dict[str, Any], b: int) -> dict[str, Any]:
    """Batch member b's prompt row tags, first/last-frame keyframes and reference images (mh.apply's keywords), as
    the cond holds them stacked over the batch; their rows are noised from the sampling seed, as ComfyUI's
    extra_conds."""
    out: dict[str, Any] = {}
    tags = cond.get("token_tags")
    if tags is not None:
        out["text_tags"] = tags[b % tags.shape[0]]
    keyframes = cond.get("keyframes")
    if keyframes:
        out["keyframes"] = [mh.Keyframe(latent[b % latent.shape[0]][None], int(frame)) for latent, frame in keyframes]
        out["seed"] = int(cond.get("keyframe_seed", 0))
    refs = cond.get("minimax_refs")
    if refs:
        out["refs"] = [latent[b % latent.shape[0]][None] for latent in refs]
        out["seed"] = int(cond.get("keyframe_seed", 0))
    return out


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> MiniMaxH3DiffusionModel:
    """The MiniMax H3 transformer of a published single file (full or curve form), float32 as on a CPU, with the
    ref's LoRAs merged."""
    path = ref.sources[0] if ref.sources else None
    module = mh.load_transformer(state_dict, path, ref.patches)
    return MiniMaxH3DiffusionModel(
        arch=ARCH,
        module=module,
        latent_format=latent_format(ARCH),
        sampling=dict(sampling_config(ARCH)),
        config=dict(module.config),
    )


class MiniMaxH3VideoVAE(VAEModel):
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
