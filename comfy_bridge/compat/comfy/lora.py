"""`comfy.lora`: reading LoRA state dicts into weight patches and applying patches to a weight, written
from ComfyUI's documented behaviour: plain LoRA (W += strength * alpha / rank * up @ down), LoCon with a
Tucker mid weight, DoRA (the merged weight rescaled to the learned per-channel magnitude), diff / set /
model_as_lora patches, nested patch lists and weight adapters (objects with ComfyUI's
`calculate_weight(weight, key, strength, strength_model, offset, function, intermediate_dtype,
original_weights)`). The key maps (model_lora_keys_unet / _clip) are built from ComfyUI's model objects,
which the MODEL / CLIP proxies packs hold do not have: they refuse. Patches are ComfyUI's tuples:
("lora", (up, down, alpha, mid, dora_scale, reshape)), ("diff", (tensor,)) and ("set", (tensor,))."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

from comfy_bridge.packs.origin import UnsupportedFeature
from nodes.models.errors import ModelLoadError
from nodes.models.lora import lora_modules

log = logging.getLogger(__name__)
_SOURCE = "<LoRA state dict>"
_OTHER_ENTRIES = (".diff", ".diff_b", ".set_weight")
# Entries of a LoRA module beyond up / down / alpha, read into the patch tuple.
_EXTRA = (".lora_mid.weight", ".dora_scale", ".reshape_weight")


def load_lora(lora: dict[str, torch.Tensor], to_load: dict[str, str], log_missing: bool = True) -> dict[str, Any]:
    """{model weight key: patch} for the LoRA modules `to_load` names ({LoRA module name: model weight key})."""
    try:
        mods = lora_modules(lora, _SOURCE)
    except ModelLoadError:
        mods = {}  # no up/down pairs: only diff / set entries can load
    patches: dict[str, Any] = {}
    loaded: set[str] = set()
    for name, key in to_load.items():
        mod = mods.get(name, {})
        if "up" in mod and "down" in mod:
            alpha = float(mod["alpha"]) if "alpha" in mod else None
            mid, dora_scale, reshape = (lora.get(name + suffix) for suffix in _EXTRA)
            patches[key] = (
                "lora",
                (mod["up"], mod["down"], alpha, mid, dora_scale, None if reshape is None else reshape.tolist()),
            )
            loaded.update(k for k in lora if k.startswith(name + ".") and not k.endswith(_OTHER_ENTRIES))
        bias_key = key[: -len(".weight")] + ".bias"
        for suffix, target, kind in (
            (".diff", key, "diff"),
            (".diff_b", bias_key, "diff"),
            (".set_weight", key, "set"),
        ):
            if name + suffix in lora:
                patches[target] = (kind, (lora[name + suffix],))
                loaded.add(name + suffix)
    if log_missing:
        for k in lora:
            if k not in loaded:
                log.warning("lora key not loaded: %s", k)
    return patches


def _pad_to(weight: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """`weight` in a zero tensor of `shape` (cut where `shape` is smaller), for LoRAs that grow a layer."""
    out = torch.zeros(shape, dtype=weight.dtype, device=weight.device)
    common = tuple(slice(0, min(a, b)) for a, b in zip(weight.shape, shape))
    out[common] = weight[common]
    return out


def _lora_diff(args: tuple, weight: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, float]:
    """(up @ down in `weight`'s shape, alpha / rank) of a ("lora", args) patch."""
    up, down, alpha, mid = (a.to(weight.device, dtype) if isinstance(a, torch.Tensor) else a for a in args[:4])
    scale = alpha / down.shape[0] if alpha is not None else 1.0
    if mid is not None:
        # LoCon's Tucker form: the rank-sized down projection runs through the mid kernel (rank x rank x kh x kw).
        down = torch.einsum("ji,rjhw->rihw", down.flatten(1), mid)
    diff = up.flatten(1) @ down.flatten(1)
    if diff.shape[0] != weight.shape[0] or diff.numel() != weight.numel():
        raise ValueError(
            f"LoRA patch of shape {tuple(diff.shape)} does not fit the weight's "
            f"{tuple(weight.shape)}: the LoRA is for another model"
        )
    return diff.reshape(weight.shape), scale


def _dora(
    weight: torch.Tensor,
    diff: torch.Tensor,
    dora_scale: torch.Tensor,
    strength: float,
    function: Callable,
    dtype: torch.dtype,
) -> torch.Tensor:
    """DoRA: the LoRA-merged weight, each channel rescaled to the magnitude `dora_scale` learned; the
    channel axis is the one dora_scale's length matches (output rows, else input columns)."""
    magnitude = dora_scale.to(weight.device, dtype)
    merged = weight + function(diff).type(weight.dtype)
    ones = [1] * (weight.dim() - 1)
    if magnitude.shape[0] == merged.shape[0]:
        norm = weight.reshape(weight.shape[0], -1).norm(dim=1).reshape(weight.shape[0], *ones)
    else:
        norm = merged.transpose(0, 1).reshape(merged.shape[1], -1).norm(dim=1)
        norm = norm.reshape(merged.shape[1], *ones).transpose(0, 1)
    merged = merged * (magnitude / (norm + torch.finfo(weight.dtype).eps)).type(weight.dtype)
    if strength != 1.0:
        weight += strength * (merged - weight)
    else:
        weight.copy_(merged)
    return weight


def _apply(
    kind: str,
    v: tuple,
    weight: torch.Tensor,
    key: str,
    strength: float,
    function: Callable,
    dtype: torch.dtype,
    original_weights: Any,
) -> torch.Tensor:
    """`weight` with one typed patch applied (in place where the shape allows, as ComfyUI)."""
    if kind == "diff":
        diff = v[0]
        if len(v) > 1 and v[1].get("pad_weight") and diff.shape != weight.shape:
            weight = _pad_to(weight, list(diff.shape))
        if strength != 0.0:
            if diff.shape != weight.shape:
                log.warning(
                    "comfy.lora.calculate_weight: diff for %s has shape %s, the weight %s: not merged",
                    key,
                    tuple(diff.shape),
                    tuple(weight.shape),
                )
            else:
                weight += function(strength * diff.to(weight.device, weight.dtype))
    elif kind == "set":
        weight.copy_(v[0])
    elif kind == "model_as_lora":
        original = original_weights[key][0][0]
        delta = v[0].to(weight.device, dtype) - original.to(weight.device, dtype)
        weight += function(strength * delta.to(weight.dtype))
    elif kind == "lora":
        if len(v) > 5 and v[5] is not None:
            weight = _pad_to(weight, list(v[5]))
        diff, alpha = _lora_diff(v, weight, dtype)
        dora_scale = v[4] if len(v) > 4 else None
        if dora_scale is not None:
            weight = _dora(weight, diff * alpha, dora_scale, strength, function, dtype)
        else:
            weight += function((strength * alpha * diff).type(weight.dtype))
    else:
        log.warning("comfy.lora.calculate_weight: patch type %r for %s is not recognised: skipped", kind, key)
    return weight


def calculate_weight(
    patches: list,
    weight: torch.Tensor,
    key: str,
    intermediate_dtype: torch.dtype = torch.float32,
    original_weights: Any = None,
) -> torch.Tensor:
    """Apply (strength, patch, strength_model, offset, function) entries to `weight` (in place, as ComfyUI)."""
    for strength, v, strength_model, offset, function in (tuple(p) + (None,) * (5 - len(p)) for p in patches):
        function = function or (lambda a: a)
        target = weight.narrow(*offset) if offset is not None else weight
        if strength_model != 1.0:
            target *= strength_model
        if isinstance(v, list):
            # A nested patch: v[0] is (tensor, fn(tensor, inplace)) and v[1:] patches on it; the result is a diff.
            base = v[0][1](v[0][0].to(target.device, intermediate_dtype, copy=True), inplace=True)
            v = (calculate_weight(v[1:], base, key, intermediate_dtype=intermediate_dtype),)
        if hasattr(v, "calculate_weight"):  # a weight adapter object (LoRA, LoHa, LoKr, ... in ComfyUI)
            out = v.calculate_weight(
                target, key, strength, strength_model, offset, function, intermediate_dtype, original_weights
            )
            if out is None:
                log.warning("comfy.lora.calculate_weight: %s failed for %s", type(v).__name__, key)
            elif offset is None:
                weight = out
            continue
        if not isinstance(v, tuple) or len(v) not in (1, 2):
            raise TypeError(
                f"comfy.lora.calculate_weight: the patch for {key} is a {type(v).__name__}; expected "
                "(tensor,), (kind, args), a nested patch list or a weight adapter"
            )
        kind, args = ("diff", v) if len(v) == 1 else v
        out = _apply(kind, args, target, key, strength, function, intermediate_dtype, original_weights)
        if offset is None:
            weight = out
    return weight


def model_lora_keys_unet(model: Any, key_map: dict | None = None) -> dict[str, str]:
    raise UnsupportedFeature(
        "comfy.lora.model_lora_keys_unet",
        "the diffusion model lives on the executors; apply LoRAs with nodes.LoraLoader",
    )


def model_lora_keys_clip(model: Any, key_map: dict | None = None) -> dict[str, str]:
    raise UnsupportedFeature(
        "comfy.lora.model_lora_keys_clip", "the text encoder lives on the executors; apply LoRAs with nodes.LoraLoader"
    )
