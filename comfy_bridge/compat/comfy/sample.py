"""`comfy.sample`: the noise and latent helpers packs call, and ComfyUI's sample / sample_custom, which run
the core samplers' loop (denoise steps on the cluster) from the pack's noise (comfy.sampling_run)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from comfy_bridge.compat.comfy.sampler_helpers import cleanup_additional_models
from comfy_bridge.compat.comfy.sampling_run import run, schedule
from comfy_bridge.packs.origin import UnsupportedFeature
from nodes.ksampler import fix_empty_latent_channels
from nodes.sampling.noise import prepare_noise


def sample(
    model: Any,
    noise: torch.Tensor,
    steps: int,
    cfg: float,
    sampler_name: str,
    scheduler: str,
    positive: list,
    negative: list,
    latent_image: torch.Tensor,
    denoise: float = 1.0,
    disable_noise: bool = False,
    start_step: int | None = None,
    last_step: int | None = None,
    force_full_denoise: bool = False,
    noise_mask: torch.Tensor | None = None,
    sigmas: torch.Tensor | None = None,
    callback: Any = None,
    disable_pbar: bool = False,
    seed: int | None = None,
) -> torch.Tensor:
    """KSampler's run from a prepared noise tensor: the sampled latent (see comfy.sampling_run; `sigmas`
    replaces the schedule; disable_noise is the caller's zero noise, as in ComfyUI)."""
    from comfy_bridge.compat.comfy.samplers import sampler_object

    if sigmas is None:
        sigmas = schedule(model, steps, sampler_name, scheduler, denoise, start_step, last_step, force_full_denoise)
    return run(
        model, noise, cfg, sampler_object(sampler_name), sigmas, positive, negative, latent_image, noise_mask, seed
    )


def sample_custom(
    model: Any,
    noise: torch.Tensor,
    cfg: float,
    sampler: Any,
    sigmas: torch.Tensor,
    positive: list,
    negative: list,
    latent_image: torch.Tensor,
    noise_mask: torch.Tensor | None = None,
    callback: Any = None,
    disable_pbar: bool = False,
    seed: int | None = None,
) -> torch.Tensor:
    """SamplerCustom's run from a prepared noise tensor: the sampled latent (see comfy.sampling_run)."""
    return run(
        model, noise, cfg, sampler, sigmas, positive, negative, latent_image, noise_mask, seed, callback, disable_pbar
    )


__all__ = ["prepare_noise", "fix_empty_latent_channels", "sample", "sample_custom", "cleanup_additional_models"]
