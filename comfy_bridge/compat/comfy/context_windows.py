"""`comfy.context_windows`: sampling long latents in overlapping windows (ComfyUI 0.3.5x+).

The names packs use exist: schedules and fuse methods by name, the fuse weights, and IndexListContextHandler
holding its settings. Sampling with context windows is not done by this backend's executors, so installing
a handler on a MODEL (create_prepare_sampling_wrapper / create_sampler_sample_wrapper) and computing a
schedule's windows raise UnsupportedFeature naming the call.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from comfy_bridge.packs.origin import UnsupportedFeature

WHY = "the executors sample without context windows"


@dataclass
class ContextSchedule:
    name: str
    func: Callable


@dataclass
class ContextFuseMethod:
    name: str
    func: Callable


class ContextSchedules:
    UNIFORM_LOOPED = "looped_uniform"
    UNIFORM_STANDARD = "standard_uniform"
    STATIC_STANDARD = "standard_static"
    BATCHED = "batched"


class ContextFuseMethods:
    FLAT = "flat"
    PYRAMID = "pyramid"
    RELATIVE = "relative"
    OVERLAP_LINEAR = "overlap-linear"
    LIST = [PYRAMID, FLAT, OVERLAP_LINEAR]
    LIST_STATIC = [PYRAMID, RELATIVE, FLAT, OVERLAP_LINEAR]


class IndexListContextHandler:
    """The settings of a context-window run (windows of `context_length` frames along `dim`)."""

    def __init__(self, context_schedule: ContextSchedule, fuse_method: ContextFuseMethod, context_length: int = 1,
                 context_overlap: int = 0, context_stride: int = 1, closed_loop: bool = False, dim: int = 0,
                 freenoise: bool = False, cond_retain_index_list: str | list = "",
                 split_conds_to_windows: bool = False):
        self.context_schedule, self.fuse_method = context_schedule, fuse_method
        self.context_length, self.context_overlap, self.context_stride = context_length, context_overlap, context_stride
        self.closed_loop, self.dim, self.freenoise = closed_loop, dim, freenoise
        self.cond_retain_index_list = ([int(x.strip()) for x in cond_retain_index_list.split(",")]
                                       if isinstance(cond_retain_index_list, str) and cond_retain_index_list
                                       else list(cond_retain_index_list or []))
        self.split_conds_to_windows = split_conds_to_windows
        self.callbacks: dict = {}


def _window_schedule(name: str) -> Callable:
    def windows(num_frames: int, handler: IndexListContextHandler, model_options: dict | None = None) -> Any:
        raise UnsupportedFeature(f"comfy.context_windows schedule {name!r}", WHY)
    return windows


CONTEXT_MAPPING = {name: _window_schedule(name) for name in (
    ContextSchedules.UNIFORM_LOOPED, ContextSchedules.UNIFORM_STANDARD, ContextSchedules.STATIC_STANDARD,
    ContextSchedules.BATCHED)}


def get_matching_context_schedule(context_schedule: str) -> ContextSchedule:
    if context_schedule not in CONTEXT_MAPPING:
        raise ValueError(f"Unknown context_schedule '{context_schedule}'.")
    return ContextSchedule(context_schedule, CONTEXT_MAPPING[context_schedule])


def create_weights_flat(length: int, **kwargs: Any) -> list[float]:
    return [1.0] * length


def create_weights_pyramid(length: int, **kwargs: Any) -> list[int]:
    """1, 2, ..., peak, ..., 2, 1: a frame weighs by its distance from the window's edge."""
    peak = (length + 1) // 2
    rise = list(range(1, peak + 1))
    return rise + rise[::-1] if length % 2 == 0 else rise + rise[-2::-1]


def create_weights_overlap_linear(length: int, full_length: int, idxs: list[int], handler: IndexListContextHandler,
                                  **kwargs: Any) -> torch.Tensor:
    """Ones, ramping over the overlap on each side that has a neighbouring window."""
    weights = torch.ones(length)
    if min(idxs) > 0:
        weights[:handler.context_overlap] = torch.linspace(1e-37, 1, handler.context_overlap)
    if max(idxs) < full_length - 1:
        weights[-handler.context_overlap:] = torch.linspace(1, 1e-37, handler.context_overlap)
    return weights


FUSE_MAPPING = {ContextFuseMethods.FLAT: create_weights_flat, ContextFuseMethods.PYRAMID: create_weights_pyramid,
                ContextFuseMethods.RELATIVE: create_weights_pyramid,
                ContextFuseMethods.OVERLAP_LINEAR: create_weights_overlap_linear}


def get_matching_fuse_method(fuse_method: str) -> ContextFuseMethod:
    if fuse_method not in FUSE_MAPPING:
        raise ValueError(f"Unknown fuse_method '{fuse_method}'.")
    return ContextFuseMethod(fuse_method, FUSE_MAPPING[fuse_method])


def get_context_weights(length: int, full_length: int, idxs: list[int], handler: IndexListContextHandler,
                        sigma: torch.Tensor | None = None) -> Any:
    return handler.fuse_method.func(length, sigma=sigma, handler=handler, full_length=full_length, idxs=idxs)


def create_prepare_sampling_wrapper(model: Any) -> None:
    raise UnsupportedFeature("comfy.context_windows.create_prepare_sampling_wrapper", WHY)


def create_sampler_sample_wrapper(model: Any) -> None:
    raise UnsupportedFeature("comfy.context_windows.create_sampler_sample_wrapper", WHY)
