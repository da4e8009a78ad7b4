"""A transformer published as one file in its authors' layout, loaded on diffusers' model: the steps FLUX 3 and
Krea 2 share (their layout and converter differ, the order does not)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.models.errors import ModelLoadError
from nodes.models.lora import LoraTargets, merge_loras
from nodes.models.safetensors_io import build_module

StateDict = dict[str, torch.Tensor]


def load_single_file_transformer(
    ref: ModelRef,
    state_dict: Mapping[str, torch.Tensor],
    *,
    what: str,
    layout: Callable[[Mapping[str, torch.Tensor]], StateDict],
    lora_targets: Callable[[StateDict], LoraTargets],
    convert: Callable[[StateDict], StateDict],
    infer_config: Callable[[StateDict], dict[str, Any]],
    model_class: Callable[..., torch.nn.Module],
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """(module, config): the file brought to its authors' layout, the ref's LoRAs merged in those names (the ones
    released LoRAs use, before diffusers' converter renames and reorders), converted to diffusers' names and
    built on `model_class(**config)`. A file that does not fit is refused naming `what`."""
    path = ref.sources[0] if ref.sources else None
    try:
        sd = layout(state_dict)
    except ValueError as e:
        raise ModelLoadError(path, f"not a usable {what}: {e}") from None
    if ref.patches:
        sd, _ = merge_loras(ref.patches, lora_targets(sd), sd)
    try:
        sd = convert(sd)
        config = infer_config(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable {what}: {e}") from None
    return build_module(lambda: model_class(**config), sd, path, what), config
