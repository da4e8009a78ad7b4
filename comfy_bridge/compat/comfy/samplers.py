"""`comfy.samplers`: sampler and scheduler names, and the scheduler registry packs extend.

`SCHEDULER_NAMES` / `KSampler.SCHEDULERS` and `SAMPLER_NAMES` / `KSampler.SAMPLERS` are the very lists the
core KSampler offers, and `SCHEDULER_HANDLERS` writes through to the schedules the core KSampler
computes sigmas from, so a scheduler a pack adds here is offered by KSampler and used by it. Running
a sampler object or a guider here is not supported: sampling runs as denoise steps on the executors.
"""
from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Callable, Iterator, NamedTuple

import torch

from comfy_bridge.packs.origin import UnsupportedFeature
from nodes.sampling import schedules
from nodes.sampling.samplers import SAMPLER_NAMES

KSAMPLER_NAMES = SAMPLER_NAMES
SCHEDULER_NAMES = schedules.SCHEDULER_NAMES
DISCARD_PENULTIMATE_SIGMA_SAMPLERS = set(schedules.DISCARD_PENULTIMATE_SIGMA_SAMPLERS)


class SchedulerHandler(NamedTuple):
    """`handler(model_sampling, steps)` when use_ms, else `handler(n, sigma_min, sigma_max)`."""
    handler: Callable[..., torch.Tensor]
    use_ms: bool = True


def _as_schedule(h: SchedulerHandler) -> Callable[[Any, int], torch.Tensor]:
    if h.use_ms:
        return h.handler
    return lambda ms, steps: h.handler(n=steps, sigma_min=float(ms.sigma_min), sigma_max=float(ms.sigma_max))


class _SchedulerHandlers(MutableMapping):
    """A view of the core schedules as SchedulerHandlers; entries set here become core schedules."""

    def __getitem__(self, name: str) -> SchedulerHandler:
        fn = schedules.SCHEDULERS[name]
        return getattr(fn, "_handler", None) or SchedulerHandler(fn, True)

    def __setitem__(self, name: str, handler: SchedulerHandler | Callable) -> None:
        if not isinstance(handler, SchedulerHandler):
            handler = SchedulerHandler(handler, True)
        fn = _as_schedule(handler)
        try:
            fn._handler = handler  # type: ignore[attr-defined]
        except AttributeError:
            pass
        schedules.SCHEDULERS[name] = fn

    def __delitem__(self, name: str) -> None:
        del schedules.SCHEDULERS[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(schedules.SCHEDULERS))

    def __len__(self) -> int:
        return len(schedules.SCHEDULERS)


SCHEDULER_HANDLERS = _SchedulerHandlers()


def calculate_sigmas(model_sampling: Any, scheduler_name: str, steps: int) -> torch.Tensor:
    return schedules.calculate_sigmas(model_sampling, scheduler_name, steps)


class KSAMPLER:
    """A sampler by name (what SamplerCustom-style nodes pass around as SAMPLER)."""

    def __init__(self, sampler_function: Any, extra_options: dict | None = None, inpaint_options: dict | None = None):
        self.sampler_function = sampler_function
        self.extra_options = extra_options or {}
        self.inpaint_options = inpaint_options or {}

    def sample(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedFeature("comfy.samplers.KSAMPLER.sample", "sampling runs as denoise steps on the executors; "
                                 "use nodes.common_ksampler")


Sampler = KSAMPLER


def ksampler(sampler_name: str, extra_options: dict | None = None, inpaint_options: dict | None = None) -> KSAMPLER:
    if sampler_name not in SAMPLER_NAMES:
        raise ValueError(f"unknown sampler {sampler_name!r}")
    return KSAMPLER(sampler_name, extra_options, inpaint_options)


def sampler_object(name: str) -> KSAMPLER:
    return ksampler(name)


class CFGGuider:
    """Present so packs can subclass it at import; guiding a sampling run here is not supported."""

    def __init__(self, model_patcher: Any) -> None:
        self.model_patcher = model_patcher
        self.model_options = getattr(model_patcher, "model_options", {})
        self.conds: dict = {}
        self.cfg = 1.0

    def set_conds(self, positive: Any, negative: Any) -> None:
        self.conds = {"positive": positive, "negative": negative}

    def set_cfg(self, cfg: float) -> None:
        self.cfg = cfg

    def sample(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedFeature("comfy.samplers.CFGGuider.sample", "use nodes.common_ksampler")


class KSampler:
    SCHEDULERS = SCHEDULER_NAMES
    SAMPLERS = SAMPLER_NAMES
    DISCARD_PENULTIMATE_SIGMA_SAMPLERS = DISCARD_PENULTIMATE_SIGMA_SAMPLERS

    def __init__(self, model: Any, steps: int, device: Any = None, sampler: str | None = None,
                 scheduler: str | None = None, denoise: float | None = None, model_options: dict | None = None):
        from nodes import arch
        from nodes.sampling.model_sampling import model_sampling_from_config
        self.model, self.steps, self.sampler, self.scheduler = model, steps, sampler, scheduler
        self.denoise = denoise
        ms = model_sampling_from_config(arch.sampling_config(model.arch))
        self.sigmas = schedules.ksampler_sigmas(ms, scheduler, steps, denoise, sampler)

    def sample(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedFeature("comfy.samplers.KSampler.sample", "use nodes.common_ksampler")
