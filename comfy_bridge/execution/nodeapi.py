"""One view over V1 node classes and V3 `io.ComfyNode` classes for the engine."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from comfy_bridge.compat.comfy_api.latest._io import (
    ComfyNode,
    ComfyNodeBase,
    Hidden,
    NodeOutputBase,
    build_nested_inputs,
    first_real_override,
    get_finalized_class_inputs,
)

__all__ = [
    "is_v3",
    "input_types",
    "v3_hidden",
    "custom_function",
    "bound_function",
    "Hidden",
    "NodeOutputBase",
    "hidden_values",
]


def is_v3(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, ComfyNodeBase)


# Key of the hidden-values dict that carries a V3 node's dynamic input paths to the call (and to an executor).
DYNAMIC_PATHS = "__v3_dynamic_paths__"


def input_types(cls: type, include_hidden: bool = True, live_inputs: dict | None = None) -> dict:
    """INPUT_TYPES() (fresh every time: combo lists follow the files on disk).

    `live_inputs`, a prompt node's inputs, expands a V3 node's dynamic inputs into those it has there.
    """
    if is_v3(cls):
        return cls.INPUT_TYPES(include_hidden=include_hidden, live_inputs=live_inputs)
    types = cls.INPUT_TYPES()
    if not include_hidden and "hidden" in types:
        types = {k: v for k, v in types.items() if k != "hidden"}
    return types


def v3_hidden(cls: type) -> list[Hidden]:
    return list(cls.FINALIZE_SCHEMA().hidden or []) if is_v3(cls) else []


V3_NAMES = {
    "VALIDATE_INPUTS": "validate_inputs",
    "IS_CHANGED": "fingerprint_inputs",
    "check_lazy_status": "check_lazy_status",
}


def custom_function(cls: type, v1_name: str) -> tuple[str, Callable | None]:
    """(name to call, function or None) of an optional hook: VALIDATE_INPUTS, IS_CHANGED, check_lazy_status.

    V3 hooks count only when a node class overrides the base's stub.
    """
    if is_v3(cls):
        name = V3_NAMES[v1_name]
        return name, first_real_override(cls, name, ComfyNode)
    return v1_name, getattr(cls, v1_name, None)


def hidden_values(cls: type, unique_id: str, dynprompt: Any, extra_data: dict, live_inputs: dict | None = None) -> dict:
    """The V3 hidden values a node declared (V1 nodes get theirs as keyword inputs instead).

    With `live_inputs`, the paths that nest its dynamic inputs ride along under DYNAMIC_PATHS.
    """
    values: dict = {}
    if live_inputs is not None:
        _, _, v3_data = get_finalized_class_inputs(cls.INPUT_TYPES(include_hidden=False), live_inputs)
        if v3_data:
            values[DYNAMIC_PATHS] = v3_data
    for h in v3_hidden(cls):
        if h is Hidden.prompt:
            values[h] = dynprompt.get_original_prompt() if dynprompt is not None else {}
        elif h is Hidden.dynprompt:
            values[h] = dynprompt
        elif h is Hidden.extra_pnginfo:
            values[h] = extra_data.get("extra_pnginfo")
        elif h is Hidden.unique_id:
            values[h] = unique_id
        elif h is Hidden.auth_token_comfy_org:
            values[h] = extra_data.get("auth_token_comfy_org")
        elif h is Hidden.api_key_comfy_org:
            values[h] = extra_data.get("api_key_comfy_org")
        elif h is Hidden.comfy_usage_source:
            values[h] = extra_data.get("comfy_usage_source")
    return values


def bound_function(obj: Any, func: str, hidden: dict | None) -> Callable:
    """The callable for `func` on a node instance/class; V3 calls go to a per-call clone holding `hidden`."""
    cls = obj if isinstance(obj, type) else type(obj)
    if is_v3(cls):
        cls.VALIDATE_CLASS()
        fn = getattr(cls.PREPARE_CLASS_CLONE(hidden), func)
        paths = (hidden or {}).get(DYNAMIC_PATHS)
        if paths:
            # check_lazy_status names inputs by their flat ids: it gets (value, id) pairs to answer with.
            v3_data = dict(paths, create_dynamic_tuple=True) if func == "check_lazy_status" else paths
            return _nesting(fn, v3_data)
        return fn
    return getattr(obj, func)


def _nesting(fn: Callable, v3_data: dict) -> Callable:
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def call_async(**kwargs: Any) -> Any:
            return await fn(**build_nested_inputs(kwargs, v3_data))

        return call_async

    @functools.wraps(fn)
    def call(**kwargs: Any) -> Any:
        return fn(**build_nested_inputs(kwargs, v3_data))

    return call
