"""`comfy.model_detection`: reading a diffusion model's architecture from its state dict. The small pure
helpers packs call are real (count_blocks, unet_prefix_from_state_dict, convert_config,
model_config_from_unet_config), as is reading a diffusers-layout SD UNet's config (unet_config_from_diffusers_unet,
model_config_from_diffusers_unet: comfy.diffusers_unets); full detection of a state dict's unet config is this
backend's own (nodes.loaders.probe_arch, by file), so ComfyUI's detect_unet_config and model_config_from_unet
refuse."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from comfy_bridge.compat.comfy import supported_models, supported_models_base
from comfy_bridge.packs.origin import UnsupportedFeature

_WHY = (
    "Comfy Cluster detects architectures from model files (nodes.loaders.probe_arch) and builds the models "
    "on the executors; ComfyUI's in-process unet config detection is not available"
)


def count_blocks(state_dict_keys: Iterable[str], prefix_string: str) -> int:
    """How many consecutive block indices n = 0, 1, ... have a key starting with prefix_string.format(n)."""
    keys = list(state_dict_keys)
    count = 0
    while any(k.startswith(prefix_string.format(count)) for k in keys):
        count += 1
    return count


def unet_prefix_from_state_dict(state_dict: dict) -> str:
    """The key prefix of the diffusion model in a checkpoint: the most common of the known ones (when more
    than 5 keys have it), else "model."."""
    candidates = ["model.diffusion_model.", "model.model.", "net."]
    counts = dict.fromkeys(candidates, 0)
    for key in state_dict:
        for c in candidates:
            if key.startswith(c):
                counts[c] += 1
                break
    top = max(counts, key=counts.__getitem__)
    return top if counts[top] > 5 else "model."


def convert_config(unet_config: dict) -> dict:
    """An LDM yaml unet config in ComfyUI's form: per-level num_res_blocks and, from attention_resolutions,
    per-block transformer depths for the input and output sides."""
    config = dict(unet_config)
    num_res_blocks = config.get("num_res_blocks")
    channel_mult = config.get("channel_mult")
    if isinstance(num_res_blocks, int):
        num_res_blocks = [num_res_blocks] * len(channel_mult)
    if "attention_resolutions" in config:
        resolutions = config.pop("attention_resolutions")
        depth = config.get("transformer_depth")
        middle = config.get("transformer_depth_middle")
        if isinstance(depth, int):
            depth = [depth] * len(channel_mult)
        if middle is None:
            middle = depth[-1]
        t_in: list[int] = []
        t_out: list[int] = []
        for level, res in enumerate(num_res_blocks):
            d = depth[level] if 2**level in resolutions else 0
            t_in += [d] * res
            t_out += [d] * (res + 1)
        config.update(transformer_depth=t_in, transformer_depth_output=t_out, transformer_depth_middle=middle)
    config["num_res_blocks"] = num_res_blocks
    return config


def model_config_from_unet_config(unet_config: dict, state_dict: dict | None = None) -> Any:
    """An instance of the first supported_models.models class whose unet_config matches, else None."""
    for config in supported_models.models:
        if config.matches(unet_config, state_dict):
            return config(unet_config)
    return None


def unet_config_from_diffusers_unet(state_dict: dict, dtype: Any = None) -> dict | None:
    """The LDM unet config of a diffusers-layout SD-family UNet state dict, when it is one of the models ComfyUI
    knows (comfy.diffusers_unets), else None."""
    from comfy_bridge.compat.comfy.diffusers_unets import unet_config

    config = unet_config(state_dict, dtype, count_blocks)
    return None if config is None else convert_config(config)


def model_config_from_diffusers_unet(state_dict: dict) -> Any:
    """The supported_models config of a diffusers-layout UNet state dict, or None."""
    unet_config = unet_config_from_diffusers_unet(state_dict)
    return None if unet_config is None else model_config_from_unet_config(unet_config)


def _refuse(name: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedFeature(f"comfy.model_detection.{name}", _WHY)

    refuse.__name__ = refuse.__qualname__ = name
    return refuse


detect_unet_config = _refuse("detect_unet_config")
model_config_from_unet = _refuse("model_config_from_unet")
calculate_transformer_depth = _refuse("calculate_transformer_depth")
convert_diffusers_mmdit = _refuse("convert_diffusers_mmdit")

__all__ = [
    "count_blocks",
    "unet_prefix_from_state_dict",
    "convert_config",
    "model_config_from_unet_config",
    "detect_unet_config",
    "model_config_from_unet",
    "unet_config_from_diffusers_unet",
    "model_config_from_diffusers_unet",
    "calculate_transformer_depth",
    "convert_diffusers_mmdit",
    "supported_models_base",
]
