"""ComfyUI's in-process sampling entry points (comfy.sample.sample / sample_custom, comfy.samplers.sample) on
this backend. With one of this backend's samplers (what KSamplerSelect, comfy.samplers.sampler_object and the
sampler nodes return) the run is the loop the KSampler and SamplerCustom nodes run (nodes.ksampler.sample_guided,
one denoise step per executor call), started from the noise tensor the pack passes; `callback` is then not
called per step (progress and previews are reported as for the core samplers). Any other SAMPLER (a KSAMPLER of
a pack's own k-diffusion function, a pack's Sampler subclass) runs as in ComfyUI: its `sample` here, around a
guider model whose every call is one CFG-guided evaluation on the executors (nodes.guided_evaluation)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


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
    callback: Callable | None = None,
    disable_pbar: bool = False,
) -> torch.Tensor:
    """The sampled latent (in the latent format's outside space, as ComfyUI returns it) of one guided run."""
    from comfy_bridge.registry import run_coroutine_sync
    from nodes.inputs import require_model
    from nodes.ksampler import GuiderChoice, sample_guided

    guider = GuiderChoice(require_model(model), positive, negative, cfg)
    if not ours(sampler):
        return _run_sampler(
            guider, model, noise, sampler, sigmas, latent_image, noise_mask, seed, callback, disable_pbar
        )
    latent = {"samples": latent_image}
    if noise_mask is not None:
        latent["noise_mask"] = noise_mask
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


class GuiderModel:
    """What a SAMPLER's `sample` gets as its model, as ComfyUI's CFGGuider: called with (x, sigma, model_options,
    seed) it gives the CFG-guided denoised prediction, evaluated on the executors; `inner_model` is the MODEL's
    model (model_sampling, latent_format), and model_patcher, model_options, conds and cfg are the guider's."""

    def __init__(self, model: Any, guider: Any, evaluation: Callable[[torch.Tensor, torch.Tensor], Any]) -> None:
        from cluster.runtime import runtime
        from comfy_bridge.packs.proxies import wrap

        self.model_patcher = wrap(guider.model)
        self.inner_model = self.model_patcher.model
        self.model_options = getattr(model, "model_options", self.model_patcher.model_options)
        self.conds = {"positive": guider.positive, "negative": guider.negative}
        self.cfg = guider.cfg
        self._evaluation = evaluation
        self._runtime = runtime()  # the prompt's: the evaluations run in threads that do not inherit it

    def __call__(self, x: torch.Tensor, timestep: torch.Tensor, model_options: dict | None = None, seed: Any = None):
        return self.predict_noise(x, timestep, model_options, seed)

    def predict_noise(
        self, x: torch.Tensor, timestep: torch.Tensor, model_options: dict | None = None, seed: Any = None
    ) -> torch.Tensor:
        from cluster.runtime import restore_runtime, use_runtime
        from comfy_bridge.registry import run_coroutine_sync

        async def evaluate() -> torch.Tensor:
            token = use_runtime(self._runtime)
            try:
                return await self._evaluation(x, timestep)
            finally:
                restore_runtime(token)

        return run_coroutine_sync(evaluate()).to(x.dtype)


def _run_sampler(
    guider: Any,
    model: Any,
    noise: torch.Tensor,
    sampler: Any,
    sigmas: torch.Tensor,
    latent_image: torch.Tensor,
    noise_mask: torch.Tensor | None,
    seed: int | None,
    callback: Callable | None,
    disable_pbar: bool,
) -> torch.Tensor:
    """ComfyUI's CFGGuider.sample for any SAMPLER: the latent into model space (an all-zero one left as it is),
    the mask to the noise's shape, `sampler.sample` around the guider model, the result back out."""
    from comfy_bridge.compat.comfy.model_patcher import create_model_options_clone
    from comfy_bridge.compat.comfy.sampler_helpers import prepare_mask
    from nodes.guided_evaluation import guided_evaluation
    from nodes.modelfns.model_options import latent_format

    sigmas = torch.as_tensor(sigmas, dtype=torch.float32)
    if sigmas.shape[-1] == 0:
        return latent_image
    fmt = latent_format(guider.model)
    if torch.count_nonzero(latent_image) > 0:
        latent_image = fmt.process_in(latent_image)
    evaluation = guided_evaluation(guider, sigmas, latent_image, 0 if seed is None else int(seed))
    wrap = GuiderModel(model, guider, evaluation)
    if noise_mask is not None:
        noise_mask = prepare_mask(noise_mask, noise.shape, noise.device)
    extra_args = {"model_options": create_model_options_clone(wrap.model_options), "seed": seed}
    samples = sampler.sample(wrap, sigmas, extra_args, callback, noise, latent_image, noise_mask, disable_pbar)
    return fmt.process_out(samples.to(torch.float32))


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
