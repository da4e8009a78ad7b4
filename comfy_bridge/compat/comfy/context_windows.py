"""`comfy.context_windows`: sampling long latents in overlapping windows (ComfyUI 0.3.5x+).

The names packs use exist: schedules and fuse methods by name (a schedule computes its windows with
nodes.sampling.context_windows), the fuse weights, and IndexListContextHandler holding its settings. A pack
installs a handler as ComfyUI's ContextWindowsManual does: model_options["context_handler"], then
create_prepare_sampling_wrapper (and create_sampler_sample_wrapper for FreeNoise) on the MODEL; here those calls
put the handler's settings on the MODEL, and its denoise steps evaluate window by window. Handler features the
denoise step lacks (retained cond indices, conds split per window, callbacks) raise UnsupportedFeature.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from comfy_bridge.packs.origin import UnsupportedFeature
from nodes.modelfns.model_options import WINDOWS
from nodes.sampling import context_windows as windows_impl

WHY = "the denoise step's context windows cut x and the conditioning tensors only"


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

    def __init__(
        self,
        context_schedule: ContextSchedule,
        fuse_method: ContextFuseMethod,
        context_length: int = 1,
        context_overlap: int = 0,
        context_stride: int = 1,
        closed_loop: bool = False,
        dim: int = 0,
        freenoise: bool = False,
        cond_retain_index_list: str | list = "",
        split_conds_to_windows: bool = False,
    ):
        self.context_schedule, self.fuse_method = context_schedule, fuse_method
        self.context_length, self.context_overlap, self.context_stride = context_length, context_overlap, context_stride
        self.closed_loop, self.dim, self.freenoise = closed_loop, dim, freenoise
        self.cond_retain_index_list = (
            [int(x.strip()) for x in cond_retain_index_list.split(",")]
            if isinstance(cond_retain_index_list, str) and cond_retain_index_list
            else list(cond_retain_index_list or [])
        )
        self.split_conds_to_windows = split_conds_to_windows
        self.callbacks: dict = {}
        self._step = 0  # the sampling step the uniform schedules lay their windows for

    def settings(self) -> windows_impl.ContextWindows:
        """The handler as the denoise step's settings; what the step cannot do is refused by name."""
        for name, used in (
            ("cond_retain_index_list", self.cond_retain_index_list),
            ("split_conds_to_windows", self.split_conds_to_windows),
            ("callbacks", self.callbacks),
        ):
            if used:
                raise UnsupportedFeature(f"comfy.context_windows.IndexListContextHandler.{name}", WHY)
        return windows_impl.ContextWindows(
            self.context_schedule.name,
            self.fuse_method.name,
            int(self.context_length),
            int(self.context_overlap),
            int(self.context_stride),
            bool(self.closed_loop),
            int(self.dim),
            bool(self.freenoise),
        )


def _window_schedule(name: str) -> Callable:
    def windows(num_frames: int, handler: IndexListContextHandler, model_options: dict | None = None) -> Any:
        settings = handler.settings()
        if settings.schedule != name:  # a schedule function called with another schedule's handler
            settings = replace(settings, schedule=name)
        return windows_impl.windows(settings, num_frames, handler._step)

    return windows


CONTEXT_MAPPING = {
    name: _window_schedule(name)
    for name in (
        ContextSchedules.UNIFORM_LOOPED,
        ContextSchedules.UNIFORM_STANDARD,
        ContextSchedules.STATIC_STANDARD,
        ContextSchedules.BATCHED,
    )
}


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


def create_weights_overlap_linear(
    length: int, full_length: int, idxs: list[int], handler: IndexListContextHandler, **kwargs: Any
) -> torch.Tensor:
    """Ones, ramping over the overlap on each side that has a neighbouring window."""
    weights = torch.ones(length)
    if min(idxs) > 0:
        weights[: handler.context_overlap] = torch.linspace(1e-37, 1, handler.context_overlap)
    if max(idxs) < full_length - 1:
        weights[-handler.context_overlap :] = torch.linspace(1, 1e-37, handler.context_overlap)
    return weights


FUSE_MAPPING = {
    ContextFuseMethods.FLAT: create_weights_flat,
    ContextFuseMethods.PYRAMID: create_weights_pyramid,
    ContextFuseMethods.RELATIVE: create_weights_pyramid,
    ContextFuseMethods.OVERLAP_LINEAR: create_weights_overlap_linear,
}


def get_matching_fuse_method(fuse_method: str) -> ContextFuseMethod:
    if fuse_method not in FUSE_MAPPING:
        raise ValueError(f"Unknown fuse_method '{fuse_method}'.")
    return ContextFuseMethod(fuse_method, FUSE_MAPPING[fuse_method])


def get_context_weights(
    length: int, full_length: int, idxs: list[int], handler: IndexListContextHandler, sigma: torch.Tensor | None = None
) -> Any:
    return handler.fuse_method.func(length, sigma=sigma, handler=handler, full_length=full_length, idxs=idxs)


def _install(model: Any, call: str) -> None:
    """ComfyUI registers its wrappers on the MODEL in place; here the handler's settings join the MODEL's options in
    place (the MODEL the pack returns is the one it passed)."""
    options = getattr(model, "model_options", None)
    handler = options.get("context_handler") if isinstance(options, dict) else None
    if not isinstance(handler, IndexListContextHandler):
        raise TypeError(
            f"comfy.context_windows.{call}: the MODEL's model_options['context_handler'] is not an "
            f"IndexListContextHandler (set it first, as ContextWindowsManual does)"
        )
    rest = tuple((k, v) for k, v in model.options if k != WINDOWS)
    object.__setattr__(model, "options", tuple(sorted(rest + ((WINDOWS, handler.settings()),))))


def create_prepare_sampling_wrapper(model: Any) -> None:
    _install(model, "create_prepare_sampling_wrapper")


def create_sampler_sample_wrapper(model: Any) -> None:
    _install(model, "create_sampler_sample_wrapper")
