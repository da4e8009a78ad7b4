"""The SD-family UNet configs ComfyUI recognises in a diffusers-layout UNet state dict
(comfy.model_detection.unet_config_from_diffusers_unet): each known model's LDM unet config, picked by what
the weights show (per-block transformer depths, widths, input channels, the class embedding's width and the
cross-attention width). The architectures' numbers are those of the published models (SD 1.x / 2.x and their
inpainting and unCLIP variants, SDXL base / refiner and its inpainting and instruct-pix2pix variants, SDXL
ControlNet-LoRA mid and small, SSD-1B, Segmind Vega, KOALA 700M / 1B, SD-XS 0.9 / 1.0, Lotus-D)."""

from __future__ import annotations

from typing import Any

_COMMON = {
    "use_checkpoint": False,
    "image_size": 32,
    "out_channels": 4,
    "use_spatial_transformer": True,
    "legacy": False,
    "use_temporal_attention": False,
    "use_temporal_resblock": False,
}


def _sd(depth: list[int], out_depth: list[int], **extra: Any) -> dict[str, Any]:
    """SD 1.x/2.x-shaped: four levels of two res blocks, 320 channels."""
    return {
        "in_channels": 4,
        "model_channels": 320,
        "num_res_blocks": [2, 2, 2, 2],
        "channel_mult": [1, 2, 4, 4],
        "transformer_depth": depth,
        "transformer_depth_output": out_depth,
        "adm_in_channels": None,
        **extra,
    }


def _xl(depth: list[int], out_depth: list[int], middle: int, res: int = 2, **extra: Any) -> dict[str, Any]:
    """SDXL-shaped: three levels, 320 channels, CLIP-G/L context and the 2816-wide size/pooled embedding."""
    return {
        "in_channels": 4,
        "model_channels": 320,
        "num_res_blocks": [res] * 3,
        "channel_mult": [1, 2, 4],
        "transformer_depth": depth,
        "transformer_depth_output": out_depth,
        "transformer_depth_middle": middle,
        "adm_in_channels": 2816,
        "num_classes": "sequential",
        "context_dim": 2048,
        "num_head_channels": 64,
        "use_linear_in_transformer": True,
        **extra,
    }


_SD1 = {"transformer_depth_middle": 1, "use_linear_in_transformer": False, "context_dim": 768, "num_heads": 8}
_SD2 = {"transformer_depth_middle": 1, "use_linear_in_transformer": True, "context_dim": 1024, "num_head_channels": 64}
_SD_DEPTH, _SD_OUT = [1, 1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0]
_XL_DEPTH, _XL_OUT = [0, 0, 2, 2, 10, 10], [0, 0, 0, 2, 2, 2, 10, 10, 10]
_UNCLIP = {"num_classes": "sequential"}

# In ComfyUI's order of preference: the first whose numbers match the weights is the model.
KNOWN: list[dict[str, Any]] = [
    _sd(_SD_DEPTH, _SD_OUT, **{**_SD2, "num_head_channels": None, "num_heads": 8}, adm_in_channels=4),  # Lotus-D
    _xl(_XL_DEPTH, _XL_OUT, 10),  # SDXL
    {
        **_xl([0, 0, 4, 4, 4, 4, 0, 0], [0, 0, 0, 4, 4, 4, 4, 4, 4, 0, 0, 0], 4),
        "num_res_blocks": [2, 2, 2, 2],
        "channel_mult": [1, 2, 4, 4],
        "model_channels": 384,
        "adm_in_channels": 2560,
        "context_dim": 1280,
    },  # refiner
    _sd(_SD_DEPTH, _SD_OUT, **_SD2),  # SD 2.1
    _sd(_SD_DEPTH, _SD_OUT, **_SD1),  # SD 1.5
    _sd(_SD_DEPTH, _SD_OUT, **_SD2, **_UNCLIP, adm_in_channels=2048),  # unCLIP-H
    _sd(_SD_DEPTH, _SD_OUT, **_SD2, **_UNCLIP, adm_in_channels=1536),  # unCLIP-L
    _xl([0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0, 1, 1, 1], 1),  # mid cnet
    _xl([0] * 6, [0] * 9, 0, context_dim=1),  # small cnet
    _xl(_XL_DEPTH, _XL_OUT, 10, in_channels=9),  # inpaint
    _xl([0, 0, 2, 2, 4, 4], [0, 0, 0, 1, 1, 2, 10, 4, 4], -1),  # SSD-1B
    _xl([0, 0, 1, 1, 2, 2], [0, 0, 0, 1, 1, 1, 2, 2, 2], -1),  # Vega
    _xl([0, 2, 5], [0, 0, 2, 2, 5, 5], -2, res=1),  # KOALA 700M
    _xl([0, 2, 6], [0, 0, 2, 2, 6, 6], 6, res=1),  # KOALA 1B
    {
        **_sd([1, 1, 1], [1] * 6, **_SD2),
        "num_res_blocks": [1, 1, 1],
        "channel_mult": [1, 2, 4],
        "transformer_depth_middle": -2,
        "disable_self_attentions": [True, False, False],
    },  # SD-XS 0.9
    {
        **_sd([0, 1, 1], [0, 0, 1, 1, 1, 1], **_SD1),
        "num_res_blocks": [1, 1, 1],
        "channel_mult": [1, 2, 4],
        "transformer_depth_middle": -2,
        "num_heads": None,
        "num_head_channels": 64,
    },  # SD-XS 1.0
    _xl(_XL_DEPTH, _XL_OUT, 10, in_channels=8),  # ip2p
    _sd(_SD_DEPTH, _SD_OUT, **_SD1, in_channels=9),  # SD 1.5 inpaint
]


def _config(entry: dict[str, Any], dtype: Any) -> dict[str, Any]:
    """The full config; a None head setting marks the one a model does not have (heads or head width)."""
    heads = ("num_heads", "num_head_channels")
    return {**_COMMON, **{k: v for k, v in entry.items() if v is not None or k not in heads}, "dtype": dtype}


def read(state_dict: dict, count_blocks: Any) -> dict[str, Any] | None:
    """What the weights show (the numbers a known config must have), or None for no diffusers UNet."""
    if "conv_in.weight" not in state_dict:
        return None
    shown: dict[str, Any] = {}
    depth: list[int] = []
    for level in range(count_blocks(state_dict, "down_blocks.{}")):
        attentions = count_blocks(state_dict, f"down_blocks.{level}.attentions." + "{}")
        for a in range(attentions):
            n = count_blocks(state_dict, f"down_blocks.{level}.attentions.{a}.transformer_blocks." + "{}")
            depth.append(n)
            if n:
                shown["context_dim"] = state_dict[
                    f"down_blocks.{level}.attentions.{a}.transformer_blocks.0.attn2.to_k.weight"
                ].shape[1]
        if not attentions:
            depth += [0] * count_blocks(state_dict, f"down_blocks.{level}.resnets." + "{}")
    conv_in = state_dict["conv_in.weight"]
    shown.update(
        transformer_depth=depth, model_channels=conv_in.shape[0], in_channels=conv_in.shape[1], adm_in_channels=None
    )
    for embedding in ("class_embedding", "add_embedding"):
        if f"{embedding}.linear_1.weight" in state_dict:
            shown["adm_in_channels"] = state_dict[f"{embedding}.linear_1.weight"].shape[1]
            break
    return shown


def unet_config(state_dict: dict, dtype: Any, count_blocks: Any) -> dict[str, Any] | None:
    """The LDM unet config of the first known model the weights match, or None."""
    shown = read(state_dict, count_blocks)
    if shown is None:
        return None
    for entry in KNOWN:
        config = _config(entry, dtype)
        if all(config.get(k) == v for k, v in shown.items()):
            return config
    return None
