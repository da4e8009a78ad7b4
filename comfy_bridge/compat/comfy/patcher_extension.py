"""`comfy.patcher_extension`: the callback and wrapper registries packs keep in a model's
`transformer_options` (or a model_options dict's nested `transformer_options`).

Both registries are plain nested dicts, `{type: {key: [fn, ...]}}` under "callbacks" / "wrappers", so a
pack that registers here and reads back gets exactly what it put in, and copies made with
`copy_nested_dicts` / `merge_nested_dicts` behave as ComfyUI's do. `WrapperExecutor` runs a list of
wrappers around a function, each wrapper receiving the executor that calls the next one.
Our sampling runs as denoise steps on the executors, so registered wrappers and callbacks are kept
(packs read them back) but the server's own sampling loop does not call them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class CallbacksMP:
    """The callback types (the names are ComfyUI's)."""

    ON_CLONE = "on_clone"
    ON_LOAD = "on_load_after"
    ON_DETACH = "on_detach_after"
    ON_CLEANUP = "on_cleanup"
    ON_PRE_RUN = "on_pre_run"
    ON_PREPARE_STATE = "on_prepare_state"
    ON_APPLY_HOOKS = "on_apply_hooks"
    ON_REGISTER_ALL_HOOK_PATCHES = "on_register_all_hook_patches"
    ON_INJECT_MODEL = "on_inject_model"
    ON_EJECT_MODEL = "on_eject_model"

    @classmethod
    def init_callbacks(cls) -> dict[str, dict[str, list[Callable]]]:
        return {}


class WrappersMP:
    """The wrapper types (the names are ComfyUI's)."""

    OUTER_SAMPLE = "outer_sample"
    PREPARE_SAMPLING = "prepare_sampling"
    SAMPLER_SAMPLE = "sampler_sample"
    PREDICT_NOISE = "predict_noise"
    CALC_COND_BATCH = "calc_cond_batch"
    APPLY_MODEL = "apply_model"
    DIFFUSION_MODEL = "diffusion_model"

    @classmethod
    def init_wrappers(cls) -> dict[str, dict[str, list[Callable]]]:
        return {}


def _options(transformer_options: dict, is_model_options: bool, create: bool) -> dict:
    if not is_model_options:
        return transformer_options
    if create:
        return transformer_options.setdefault("transformer_options", {})
    return transformer_options.get("transformer_options", {})


def _add(section: str, kind: str, key: Any, fn: Callable, transformer_options: dict, is_model_options: bool) -> None:
    registry = _options(transformer_options, is_model_options, True).setdefault(section, {})
    registry.setdefault(kind, {}).setdefault(key, []).append(fn)


def _with_key(section: str, kind: str, key: Any, transformer_options: dict, is_model_options: bool) -> list[Callable]:
    registry = _options(transformer_options, is_model_options, False).get(section, {})
    return list(registry.get(kind, {}).get(key, []))


def _all(section: str, kind: str, transformer_options: dict, is_model_options: bool) -> list[Callable]:
    registry = _options(transformer_options, is_model_options, False).get(section, {})
    return [fn for fns in registry.get(kind, {}).values() for fn in fns]


def add_callback(call_type: str, callback: Callable, transformer_options: dict, is_model_options: bool = False) -> None:
    _add("callbacks", call_type, None, callback, transformer_options, is_model_options)


def add_callback_with_key(
    call_type: str, key: str, callback: Callable, transformer_options: dict, is_model_options: bool = False
) -> None:
    _add("callbacks", call_type, key, callback, transformer_options, is_model_options)


def get_callbacks_with_key(
    call_type: str, key: str, transformer_options: dict, is_model_options: bool = False
) -> list[Callable]:
    return _with_key("callbacks", call_type, key, transformer_options, is_model_options)


def get_all_callbacks(call_type: str, transformer_options: dict, is_model_options: bool = False) -> list[Callable]:
    return _all("callbacks", call_type, transformer_options, is_model_options)


def add_wrapper(
    wrapper_type: str, wrapper: Callable, transformer_options: dict, is_model_options: bool = False
) -> None:
    _add("wrappers", wrapper_type, None, wrapper, transformer_options, is_model_options)


def add_wrapper_with_key(
    wrapper_type: str, key: str, wrapper: Callable, transformer_options: dict, is_model_options: bool = False
) -> None:
    _add("wrappers", wrapper_type, key, wrapper, transformer_options, is_model_options)


def get_wrappers_with_key(
    wrapper_type: str, key: str, transformer_options: dict, is_model_options: bool = False
) -> list[Callable]:
    return _with_key("wrappers", wrapper_type, key, transformer_options, is_model_options)


def get_all_wrappers(wrapper_type: str, transformer_options: dict, is_model_options: bool = False) -> list[Callable]:
    return _all("wrappers", wrapper_type, transformer_options, is_model_options)


class WrapperExecutor:
    """Calls `wrappers[idx](executor, *args)`; calling the executor a wrapper received runs the next
    wrapper, and after the last one the original function. `class_obj` is the instance whose method is
    wrapped (None for a plain function), for wrappers that need it."""

    def __init__(self, original: Callable, class_obj: object, wrappers: list[Callable], idx: int):
        self.original = original
        self.class_obj = class_obj
        self.wrappers = list(wrappers)
        self.idx = idx
        self.is_last = idx == len(wrappers)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.next_executor().execute(*args, **kwargs)

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        """Start the chain at this executor (wrappers call the executor they got instead)."""
        if self.is_last:
            return self.original(*args, **kwargs)
        return self.wrappers[self.idx](self, *args, **kwargs)

    def next_executor(self) -> WrapperExecutor:
        if self.idx + 1 > len(self.wrappers):
            raise IndexError(f"WrapperExecutor: no wrapper after index {self.idx} of {len(self.wrappers)}")
        return type(self)(self.original, self.class_obj, self.wrappers, self.idx + 1)

    @classmethod
    def new_executor(cls, original: Callable, wrappers: list[Callable], idx: int = 0) -> WrapperExecutor:
        return cls(original, None, wrappers, idx)

    @classmethod
    def new_class_executor(
        cls, original: Callable, class_obj: object, wrappers: list[Callable], idx: int = 0
    ) -> WrapperExecutor:
        return cls(original, class_obj, wrappers, idx)


class PatcherInjection:
    """A pair of functions a pack registers to change a model in place (`inject(patcher)`) and undo it
    (`eject(patcher)`)."""

    def __init__(self, inject: Callable, eject: Callable):
        self.inject = inject
        self.eject = eject


def copy_nested_dicts(input_dict: dict) -> dict:
    """A copy in which nested dicts are copied (recursively) and lists are shallow-copied."""
    out = dict(input_dict)
    for key, value in input_dict.items():
        if isinstance(value, dict):
            out[key] = copy_nested_dicts(value)
        elif isinstance(value, list):
            out[key] = list(value)
    return out


def merge_nested_dicts(dict1: dict, dict2: dict, copy_dict1: bool = True) -> dict:
    """dict1 with dict2 merged in: nested dicts merge (dict2's entries first, then dict1's over them),
    lists extend, other values from dict2 replace."""
    merged = copy_nested_dicts(dict1) if copy_dict1 else dict1
    for key, value in dict2.items():
        if isinstance(value, dict):
            merged[key] = merge_nested_dicts(value, merged.setdefault(key, {}))
        elif isinstance(value, list):
            merged.setdefault(key, []).extend(value)
        else:
            merged[key] = value
    return merged
