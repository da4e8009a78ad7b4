"""`comfy.comfy_types`: node typing helpers."""
from typing import Any, Callable, Optional, Protocol, TypedDict

from .node_typing import IO, CheckLazyMixin, ComfyNodeABC, FileLocator, InputTypeDict


class UnetApplyFunction(Protocol):
    def __call__(self, x: Any, t: Any, **kwargs: Any) -> Any: ...


class UnetApplyConds(TypedDict):
    c_concat: Optional[Any]
    c_crossattn: Optional[Any]
    control: Optional[Any]
    transformer_options: Optional[dict]


class UnetParams(TypedDict):
    input: Any
    timestep: Any
    c: UnetApplyConds
    cond_or_uncond: list


UnetWrapperFunction = Callable[[UnetApplyFunction, UnetParams], Any]

__all__ = ["UnetWrapperFunction", "UnetApplyConds", "UnetParams", "UnetApplyFunction", "IO", "InputTypeDict",
           "ComfyNodeABC", "CheckLazyMixin", "FileLocator"]
