"""`comfy.lora`: reading LoRA state dicts into weight patches and applying patches to a weight, written
from ComfyUI's documented behaviour: plain LoRA (W += strength * alpha / rank * up @ down), LoCon with a
Tucker mid weight, DoRA (the merged weight rescaled to the learned per-channel magnitude), diff / set /
model_as_lora patches, nested patch lists and weight adapters (objects with ComfyUI's
`calculate_weight(weight, key, strength, strength_model, offset, function, intermediate_dtype,
original_weights)`). The key maps (model_lora_keys_unet / _clip) name each weight of a model's state dict in the
LoRA formats ComfyUI reads; a MODEL's `.model` gives its state dict in ComfyUI's names (comfy.model_state).
Patches are ComfyUI's tuples:
("lora", (up, down, alpha, mid, dora_scale, reshape)), ("diff", (tensor,)) and ("set", (tensor,))."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

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


# CLIP layer parts as LoRA trainers name them (kohya's underscores).
LORA_CLIP_MAP = {
    "mlp.fc1": "mlp_fc1",
    "mlp.fc2": "mlp_fc2",
    "self_attn.k_proj": "self_attn_k_proj",
    "self_attn.q_proj": "self_attn_q_proj",
    "self_attn.v_proj": "self_attn_v_proj",
    "self_attn.out_proj": "self_attn_out_proj",
}
_TOWER_LAYER = "{}.transformer.text_model.encoder.layers.{}.{}.weight"


def _clip_layer_names(sdk: set[str], key_map: dict) -> tuple[bool, bool]:
    """The per-layer names of the CLIP towers (clip_h, clip_l, clip_g) in kohya and diffusers formats; returns
    (clip_l present, clip_g present). A lone clip_g (SDXL refiner, Stable Cascade) takes the first encoder's names."""
    l_present = g_present = False
    for b in range(32):
        for part, kohya in LORA_CLIP_MAP.items():
            for tower in ("clip_h", "clip_l", "clip_g"):
                k = _TOWER_LAYER.format(tower, b, part)
                if k not in sdk:
                    continue
                layer = f"text_model_encoder_layers_{b}_{kohya}"
                diffusers = f"text_model.encoder.layers.{b}.{part}"
                if tower == "clip_g":
                    g_present = True
                    if l_present:
                        names = [f"lora_te2_{layer}", f"text_encoder_2.{diffusers}"]
                    else:
                        names = [f"lora_te_{layer}", f"text_encoder.{diffusers}", f"lora_prior_te_{layer}"]
                else:
                    l_present = l_present or tower == "clip_l"
                    names = [f"lora_te_{layer}", f"lora_te1_{layer}", f"text_encoder.{diffusers}"]
                key_map.update(dict.fromkeys(names, k))
    return l_present, g_present


def model_lora_keys_clip(model: Any, key_map: dict | None = None) -> dict:
    """{LoRA module name: text encoder weight key} for `model` (a CLIP's cond_stage_model), updating `key_map`:
    every weight under "text_encoders.<key>", the CLIP towers' layers in kohya (lora_te_, lora_te1_/lora_te2_,
    lora_prior_te_) and diffusers (text_encoder., text_encoder_2.) names, T5-XXL in OneTrainer's numbering after
    the CLIP towers present, HunyuanDiT's BERT, and the towers' text projections, as ComfyUI names them."""
    key_map = {} if key_map is None else key_map
    sdk = set(model.state_dict().keys())
    weights = [k for k in model.state_dict().keys() if k.endswith(".weight")]
    for k in weights:
        key_map[f"text_encoders.{k[: -len('.weight')]}"] = k
    l_present, g_present = _clip_layer_names(sdk, key_map)
    for k in weights:
        if k.startswith("t5xxl.transformer."):
            name = k[len("t5xxl.transformer.") : -len(".weight")].replace(".", "_")
            # OneTrainer numbers T5 after the CLIP towers; with clip_l alone (Flux) both te2 and te3 are used.
            index = 1 + g_present + l_present
            if l_present and not g_present:
                key_map[f"lora_te2_{name}"] = k
                index = 3
            key_map[f"lora_te{index}_{name}"] = k
        elif k.startswith("hydit_clip.transformer.bert."):
            name = k[len("hydit_clip.transformer.bert.") : -len(".weight")].replace(".", "_")
            key_map[f"lora_te1_{name}"] = k
    if "clip_g.transformer.text_projection.weight" in sdk:
        key_map["lora_prior_te_text_projection"] = "clip_g.transformer.text_projection.weight"
        key_map["lora_te2_text_projection"] = "clip_g.transformer.text_projection.weight"
    if "clip_l.transformer.text_projection.weight" in sdk:
        key_map["lora_te1_text_projection"] = "clip_l.transformer.text_projection.weight"
    return key_map


def _diffusers_unet_names(unet_config: dict, key_map: dict) -> None:
    """A UNet's diffusers-path names (kohya from diffusers paths, SimpleTuner's lycoris_, diffusers' attention
    processor paths with and without "unet.") for each LDM weight; nothing for a config that is not a UNet's."""
    from comfy_bridge.compat.comfy.unet_keys import unet_to_diffusers

    for dif, ldm in unet_to_diffusers(unet_config).items():
        if not dif.endswith(".weight"):
            continue
        target, path = f"diffusion_model.{ldm}", dif[: -len(".weight")]
        key_map[f"lora_unet_{path.replace('.', '_')}"] = target
        key_map[f"lycoris_{path.replace('.', '_')}"] = target
        processor = path.replace(".to_", ".processor.to_")
        if processor.endswith(".to_out.0"):
            processor = processor[: -len(".0")]
        key_map[processor] = target
        key_map[f"unet.{processor}"] = target


def _families(model: Any) -> set[str]:
    """ComfyUI model_base class names `model` is: its classes', or for this backend's MODEL view its family's."""
    from comfy_bridge.compat.comfy.model_state import COMFY_CLASS

    names = {c.__name__ for c in type(model).__mro__}
    family = COMFY_CLASS.get(getattr(model, "arch", None))
    return names | ({family} if family else set())


def model_lora_keys_unet(model: Any, key_map: dict | None = None) -> dict:
    """{LoRA module name: diffusion model weight key} for `model` (a MODEL's .model), updating `key_map`: every
    weight as "lora_unet_<path>" and as its own path, other tensors by their key, a UNet's diffusers-path names,
    and Qwen-Image's own formats, as ComfyUI names them. (ComfyUI's further formats belong to families whose model
    cannot be had here: building a comfy.model_base model refuses, and the MODEL view of those families refuses
    state_dict(), so they never reach this function.)"""
    key_map = {} if key_map is None else key_map
    sdk = list(model.state_dict().keys())
    prefix = "diffusion_model."
    for k in sdk:
        if not k.startswith(prefix):
            continue
        if k.endswith(".weight"):
            key_map[f"lora_unet_{k[len(prefix) : -len('.weight')].replace('.', '_')}"] = k
            key_map[k[: -len(".weight")]] = k
        else:
            key_map[k] = k
    _diffusers_unet_names(model.model_config.unet_config, key_map)
    if "QwenImage" in _families(model):
        for k in sdk:
            if k.startswith(prefix) and k.endswith(".weight"):
                path = k[len(prefix) : -len(".weight")]
                key_map.update({path: k, f"transformer.{path}": k, f"lycoris_{path.replace('.', '_')}": k})
    return key_map
