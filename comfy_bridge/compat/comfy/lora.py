"""`comfy.lora`: reading LoRA state dicts into weight patches and applying patches to a weight, with our
LoRA code (nodes.models.lora: the same up/down/alpha parsing and W += alpha / rank * up @ down). The
key maps (model_lora_keys_unet / _clip) are built from ComfyUI's model objects, which the MODEL / CLIP
proxies packs hold do not have: they refuse. Patches are ComfyUI's legacy tuples: ("lora", (up, down,
alpha, mid, dora_scale, reshape)), ("diff", (tensor,)) and ("set", (tensor,))."""
from __future__ import annotations

import logging
from typing import Any

import torch

from comfy_bridge.packs.origin import UnsupportedFeature
from nodes.models.errors import ModelLoadError
from nodes.models.lora import lora_delta, lora_modules

log = logging.getLogger(__name__)
_SOURCE = "<LoRA state dict>"
_OTHER_ENTRIES = (".diff", ".diff_b", ".set_weight")


def load_lora(lora: dict[str, torch.Tensor], to_load: dict[str, str], log_missing: bool = True) -> dict[str, Any]:
    """{model weight key: patch} for the LoRA modules `to_load` names ({LoRA module name: model weight key})."""
    try:
        mods = lora_modules(lora, _SOURCE)
    except ModelLoadError:
        mods = {}  # no up/down pairs: only diff / set entries can load
    patches: dict[str, Any] = {}
    loaded: set[str] = set()
    for name, key in to_load.items():
        if name + ".dora_scale" in lora:
            raise UnsupportedFeature(f"comfy.lora.load_lora: DoRA ({name}.dora_scale)", "plain LoRAs are supported")
        mod = mods.get(name, {})
        if "up" in mod and "down" in mod:
            alpha = float(mod["alpha"]) if "alpha" in mod else None
            patches[key] = ("lora", (mod["up"], mod["down"], alpha, None, None, None))
            loaded.update(k for k in lora if k.startswith(name + ".") and not k.endswith(_OTHER_ENTRIES))
        bias_key = key[:-len(".weight")] + ".bias"
        for suffix, target, kind in ((".diff", key, "diff"), (".diff_b", bias_key, "diff"),
                                     (".set_weight", key, "set")):
            if name + suffix in lora:
                patches[target] = (kind, (lora[name + suffix],))
                loaded.add(name + suffix)
    if log_missing:
        for k in lora:
            if k not in loaded:
                log.warning("lora key not loaded: %s", k)
    return patches


def _as_lora_mod(v: tuple, key: str) -> dict[str, torch.Tensor]:
    up, down, alpha, mid, dora_scale = v[:5]
    if mid is not None or dora_scale is not None:
        raise UnsupportedFeature(f"comfy.lora.calculate_weight for {key}: LoCon mid weights and DoRA",
                                 "plain up/down LoRA patches are supported")
    mod = {"up": up, "down": down}
    if alpha is not None:
        mod["alpha"] = torch.tensor(alpha)
    return mod


def calculate_weight(patches: list, weight: torch.Tensor, key: str, intermediate_dtype: torch.dtype = torch.float32,
                     original_weights: Any = None) -> torch.Tensor:
    """Apply (strength, patch, strength_model, offset, function) entries to `weight` (in place, as ComfyUI)."""
    for strength, v, strength_model, offset, function in (tuple(p) + (None,) * (5 - len(p)) for p in patches):
        function = function or (lambda a: a)
        target = weight.narrow(*offset) if offset is not None else weight
        if strength_model != 1.0:
            target *= strength_model
        if not isinstance(v, tuple):
            raise UnsupportedFeature(f"comfy.lora.calculate_weight with a {type(v).__name__} patch",
                                     "lora / diff / set tuples are supported")
        kind, args = ("diff", v) if len(v) == 1 else v
        if kind == "set":
            target.copy_(args[0])
        elif kind == "diff":
            if strength != 0.0:
                target += function(strength * args[0].to(target.device, target.dtype))
        elif kind == "lora":
            delta = lora_delta(_as_lora_mod(args, key), target, key, _SOURCE)
            target += function((strength * delta).to(target.device, intermediate_dtype)).to(target.dtype)
        else:
            raise UnsupportedFeature(f"comfy.lora.calculate_weight: {kind!r} patches",
                                     "lora / diff / set patches are supported")
    return weight


def model_lora_keys_unet(model: Any, key_map: dict | None = None) -> dict[str, str]:
    raise UnsupportedFeature("comfy.lora.model_lora_keys_unet", "the diffusion model lives on the executors; "
                             "apply LoRAs with nodes.LoraLoader")


def model_lora_keys_clip(model: Any, key_map: dict | None = None) -> dict[str, str]:
    raise UnsupportedFeature("comfy.lora.model_lora_keys_clip", "the text encoder lives on the executors; "
                             "apply LoRAs with nodes.LoraLoader")
