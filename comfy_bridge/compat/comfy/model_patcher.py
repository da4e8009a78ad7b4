"""`comfy.model_patcher`: ModelPatcher is the MODEL proxy (packs check isinstance and call its methods);
the model_options helpers edit the plain dicts packs pass around, as ComfyUI's do."""

from __future__ import annotations

from collections.abc import Callable

from comfy_bridge.compat.comfy.patcher_extension import PatcherInjection, copy_nested_dicts
from comfy_bridge.packs.proxies import ModelPatcher


def set_model_options_patch_replace(
    model_options: dict, patch: Callable, name: str, block_name: str, number: int, transformer_index: int | None = None
) -> dict:
    """Put `patch` at transformer_options["patches_replace"][name][(block_name, number[, index])]; the
    dicts on the way are copied so a clone sharing them is not changed."""
    to = dict(model_options.get("transformer_options") or {})  # a denoise step's model_options may have none yet
    replace = dict(to.get("patches_replace", {}))
    per_name = dict(replace.get(name, {}))
    block = (block_name, number) if transformer_index is None else (block_name, number, transformer_index)
    per_name[block] = patch
    replace[name] = per_name
    to["patches_replace"] = replace
    model_options["transformer_options"] = to
    return model_options


def _append_cfg_function(model_options: dict, key: str, function: Callable, disable_cfg1_optimization: bool) -> dict:
    """model_options with `function` appended to the list under `key` (a new list)."""
    model_options[key] = model_options.get(key, []) + [function]
    if disable_cfg1_optimization:
        model_options["disable_cfg1_optimization"] = True
    return model_options


def set_model_options_post_cfg_function(
    model_options: dict, post_cfg_function: Callable, disable_cfg1_optimization: bool = False
) -> dict:
    return _append_cfg_function(
        model_options, "sampler_post_cfg_function", post_cfg_function, disable_cfg1_optimization
    )


def set_model_options_pre_cfg_function(
    model_options: dict, pre_cfg_function: Callable, disable_cfg1_optimization: bool = False
) -> dict:
    return _append_cfg_function(model_options, "sampler_pre_cfg_function", pre_cfg_function, disable_cfg1_optimization)


def create_model_options_clone(orig_model_options: dict) -> dict:
    return copy_nested_dicts(orig_model_options)


__all__ = [
    "ModelPatcher",
    "PatcherInjection",
    "set_model_options_patch_replace",
    "set_model_options_post_cfg_function",
    "set_model_options_pre_cfg_function",
    "create_model_options_clone",
]
