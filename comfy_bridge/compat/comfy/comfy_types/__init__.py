"""`comfy.comfy_types`: node typing helpers."""

from collections.abc import Callable
from typing import Any, Optional, Protocol, TypedDict

from .node_typing import IO, CheckLazyMixin, ComfyNodeABC, FileLocator, InputTypeDict


class UnetApplyFunction(Protocol):
    def __call__(self, x: Any, t: Any, **kwargs: Any) -> Any: ...


class UnetApplyConds(TypedDict):
    c_concat: Any | None
    c_crossattn: Any | None
    control: Any | None
    transformer_options: dict | None


class UnetParams(TypedDict):
    input: Any
    timestep: Any
    c: UnetApplyConds
    cond_or_uncond: list


UnetWrapperFunction = Callable[[UnetApplyFunction, UnetParams], Any]

__all__ = [
    "UnetWrapperFunction",
    "UnetApplyConds",
    "UnetParams",
    "UnetApplyFunction",
    "IO",
    "InputTypeDict",
    "ComfyNodeABC",
    "CheckLazyMixin",
    "FileLocator",
]
