"""ComfyUI's in-process sampling entry points (comfy.sample.sample / sample_custom, comfy.samplers.sample) on
this backend: the same loop the KSampler and SamplerCustom nodes run (nodes.ksampler.sample_guided, one
denoise step per executor call), started from the noise tensor the pack passes.

`callback` is not called per step (the steps run on the executors); progress and previews are reported as
for the core samplers. The SAMPLER must be one of this backend's samplers (what KSamplerSelect,
comfy.samplers.sampler_object and the sampler nodes return): a pack's own k-diffusion function runs the model
in-process, which this backend does not have."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

CUSTOM_FUNCTION = (
    "only this backend's samplers run (KSamplerSelect, comfy.samplers.sampler_object, the sampler "
    "nodes): a pack's own k-diffusion function would run the model in this process"
)


@dataclass(frozen=True)
class GivenNoise:
    """A NOISE value that is the tensor a pack prepared (comfy.sample.prepare_noise); `seed` seeds the
    ancestral and SDE samplers' per-step noise, as ComfyUI's seed argument does."""

    noise: torch.Tensor
    seed: int = 0

    def generate(self, latent: dict, samples: torch.Tensor) -> torch.Tensor:
        if self.noise.numel() != samples.numel():
            raise ValueError(
                f"noise: shape {tuple(self.noise.shape)} does not match the latent's {tuple(samples.shape)}"
            )
        return self.noise.reshape(samples.shape).to(samples.dtype)


def ours(sampler: Any) -> bool:
    """Whether `sampler` is one of this backend's samplers (what the executors can step)."""
    from nodes.ksampler import SamplerChoice

    return isinstance(sampler, SamplerChoice)


def run(
    model: Any,
    noise: torch.Tensor,
    cfg: float,
    sampler: Any,
    sigmas: torch.Tensor,
    positive: list,
    negative: list,
    latent_image: torch.Tensor,
    noise_mask: torch.Tensor | None,
    seed: int | None,
) -> torch.Tensor:
    """The sampled latent (in the latent format's outside space, as ComfyUI returns it) of one guided run."""
    from comfy_bridge.registry import run_coroutine_sync
    from nodes.inputs import require_model
    from nodes.ksampler import GuiderChoice, sample_guided

    latent = {"samples": latent_image}
    if noise_mask is not None:
        latent["noise_mask"] = noise_mask
    guider = GuiderChoice(require_model(model), positive, negative, cfg)
    out, _ = run_coroutine_sync(
        sample_guided(
            guider,
            sampler,
            torch.as_tensor(sigmas, dtype=torch.float32),
            latent,
            GivenNoise(noise, 0 if seed is None else int(seed)),
        )
    )
    return out["samples"]


def schedule(
    model: Any,
    steps: int,
    sampler_name: str,
    scheduler: str,
    denoise: float,
    start_step: int | None,
    last_step: int | None,
    force_full_denoise: bool,
) -> torch.Tensor:
    """KSampler's sigmas for these settings (the cut of start_step / last_step as KSamplerAdvanced's)."""
    from nodes.inputs import require_model
    from nodes.modelfns.model_options import sampling_config
    from nodes.sampling.model_sampling import model_sampling_from_config
    from nodes.sampling.schedules import advanced_sigmas, ksampler_sigmas

    ms = model_sampling_from_config(sampling_config(require_model(model)))
    sigmas = ksampler_sigmas(ms, scheduler, steps, denoise, sampler_name)
    if start_step is not None or last_step is not None:
        sigmas = advanced_sigmas(sigmas, start_step, last_step, force_full_denoise)
    return sigmas
