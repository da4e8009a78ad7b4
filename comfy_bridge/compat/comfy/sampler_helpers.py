"""`comfy.sampler_helpers`: the conditioning helpers packs' own sampling loops call. Those that read only
conditioning data work; loading or measuring ComfyUI's BaseModel (prepare_sampling, estimate_memory) and its
hook registry raise UnsupportedFeature: here the models load on the executors."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import torch

from comfy_bridge.compat.comfy.utils import reshape_mask
from comfy_bridge.packs.origin import UnsupportedFeature


def prepare_mask(noise_mask: torch.Tensor, shape: tuple, device: Any) -> torch.Tensor:
    return reshape_mask(noise_mask, shape).to(device)


def get_models_from_cond(cond: list[dict], model_type: str) -> list:
    """Every entry of `model_type` ("control", "gligen", ...) across the conditioning's option dicts."""
    models: list = []
    for c in cond:
        if model_type in c:
            models += c[model_type] if isinstance(c[model_type], list) else [c[model_type]]
    return models


def convert_cond(cond: list) -> list[dict]:
    """[[tensor, options], ...] to ComfyUI's internal cond dicts (cross_attn, model_conds, a uuid each)."""
    out = []
    for tensor, options in cond:
        entry = options.copy()
        entry["model_conds"] = entry.get("model_conds", {})
        if tensor is not None:
            entry["cross_attn"] = tensor
        entry["uuid"] = uuid.uuid4()
        out.append(entry)
    return out


def get_additional_models(conds: dict[str, list[dict]], dtype: Any) -> tuple[list, int]:
    """(models the conditioning carries, their inference memory): control nets' own models where they have
    them (ours travel as data and have none), gligen and additional models."""
    controls, gligen, models = [], [], []
    for cond in conds.values():
        controls += get_models_from_cond(cond, "control")
        gligen += get_models_from_cond(cond, "gligen")
        models += get_models_from_cond(cond, "additional_models")
    memory = 0
    control_models: list = []
    for control in {id(c): c for c in controls}.values():
        if hasattr(control, "get_models"):
            control_models += control.get_models()
            memory += control.inference_memory_requirements(dtype)
    return control_models + [g[1] for g in gligen] + models, memory


def get_additional_models_from_model_options(model_options: dict | None = None) -> list:
    if model_options and "registered_hooks" in model_options:
        raise UnsupportedFeature(
            "comfy.sampler_helpers.get_additional_models_from_model_options", "ComfyUI's hook registry is not supported"
        )
    return []


def cleanup_additional_models(models: Iterable[Any]) -> None:
    for m in models:
        if hasattr(m, "cleanup"):
            m.cleanup()


def cleanup_models(conds: dict[str, list[dict]], models: Iterable[Any]) -> None:
    cleanup_additional_models(models)
    controls = [c for cond in conds.values() for c in get_models_from_cond(cond, "control")]
    cleanup_additional_models({id(c): c for c in controls}.values())


def estimate_memory(model: Any, noise_shape: tuple, conds: dict) -> tuple[int, int]:
    raise UnsupportedFeature(
        "comfy.sampler_helpers.estimate_memory", "it measures ComfyUI's BaseModel; here models run on the executors"
    )


def prepare_sampling(model: Any, noise_shape: tuple, conds: dict, model_options: dict | None = None) -> tuple:
    raise UnsupportedFeature(
        "comfy.sampler_helpers.prepare_sampling",
        "it loads ComfyUI's BaseModel in this process; here models load on the executors",
    )


def get_hooks_from_cond(cond: list[dict], full_hooks: Any) -> Any:
    raise UnsupportedFeature("comfy.sampler_helpers.get_hooks_from_cond", "ComfyUI's hooks are not supported")


def prepare_model_patcher(model: Any, conds: dict, model_options: dict) -> None:
    raise UnsupportedFeature("comfy.sampler_helpers.prepare_model_patcher", "ComfyUI's hooks are not supported")
