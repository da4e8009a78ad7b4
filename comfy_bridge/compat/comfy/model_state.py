"""A MODEL's diffusion model as ComfyUI's BaseModel presents its weights: `state_dict()` with ComfyUI's key names
("diffusion_model." + the network's own layout) and `model_config.unet_config`, read from the MODEL's files (the
network itself is built on the executors). Tensors load when a key is read, so key maps (comfy.lora) cost only the
files' headers. Families whose ComfyUI layout this reads: SD 1.x / 2.x / XL UNets (LDM layout as stored, or a
diffusers-layout UNet converted as ComfyUI converts it), Wan 2.x and Qwen-Image (their files' own layout, which is
ComfyUI's); the others refuse by name."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from comfy_bridge.packs.origin import UnsupportedFeature

UNET_ARCHS = frozenset({"sd1", "sd2", "sd2v", "sdxl"})
NATIVE_ARCHS = frozenset({"wan21", "wan22_5b", "qwen_image"})
# The ComfyUI model_base class of each family read here (comfy.lora picks its LoRA name formats by it).
COMFY_CLASS = {
    "sd1": "BaseModel",
    "sd2": "BaseModel",
    "sd2v": "BaseModel",
    "sdxl": "SDXL",
    "wan21": "WAN21",
    "wan22_5b": "WAN22",
    "qwen_image": "QwenImage",
}
# Where a checkpoint (or a prefixed diffusion model file) keeps the network's weights.
_PREFIXES = ("model.diffusion_model.", "diffusion_model.")


def _header(path: str) -> dict[str, tuple[int, ...]]:
    """{key: shape} of a .safetensors file from its header alone; other formats are loaded."""
    if str(path).lower().endswith((".safetensors", ".sft")):
        with open(path, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(length))
        return {k: tuple(v["shape"]) for k, v in header.items() if k != "__metadata__"}
    from comfy_bridge.compat.comfy.utils import load_torch_file

    return {k: tuple(v.shape) for k, v in load_torch_file(path).items()}


class LazyStateDict(Mapping):
    """{ComfyUI key: tensor}, each tensor read from its file when asked for."""

    def __init__(self, where: dict[str, tuple[str, str]]) -> None:
        self._where = where  # ComfyUI key -> (file, key in the file)

    def __getitem__(self, key: str) -> torch.Tensor:
        path, file_key = self._where[key]
        if str(path).lower().endswith((".safetensors", ".sft")):
            from safetensors import safe_open

            with safe_open(path, framework="pt", device="cpu") as f:
                return f.get_tensor(file_key)
        from comfy_bridge.compat.comfy.utils import load_torch_file

        return load_torch_file(path)[file_key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


@dataclass
class ModelConfig:
    """What packs read from ComfyUI's model_config here: unet_config (the UNet's block layout; {} for the DiTs)."""

    unet_config: dict[str, Any] = field(default_factory=dict)


def _count(keys: set[str], pattern: str) -> int:
    """How many consecutive indices n = 0, 1, ... have a key starting with pattern.format(n)."""
    n = 0
    while any(k.startswith(pattern.format(n)) for k in keys):
        n += 1
    return n


def unet_layout(shapes: dict[str, tuple[int, ...]]) -> dict[str, Any]:
    """The LDM UNet's block layout ComfyUI's detection reads from its weights: model channels and the channel
    multiplier of each level, res blocks per level (a level ends at a downsampler), transformer depth per input
    and output res block, and in the middle block."""
    keys = set(shapes)
    model_channels = shapes["input_blocks.0.0.weight"][0]
    res_blocks: list[int] = []
    channel_mult: list[int] = []
    depth_in: list[int] = []
    count = 0
    for i in range(1, _count(keys, "input_blocks.{}.")):
        if f"input_blocks.{i}.0.op.weight" in keys:  # a downsampler closes the level
            res_blocks.append(count)
            count = 0
            continue
        if count == 0:
            channel_mult.append(shapes[f"input_blocks.{i}.0.out_layers.3.weight"][0] // model_channels)
        count += 1
        depth_in.append(_count(keys, f"input_blocks.{i}.1.transformer_blocks.{{}}."))
    res_blocks.append(count)
    # ComfyUI lists the output side's depths from the shallowest level up: output blocks in reverse.
    depth_out = [
        _count(keys, f"output_blocks.{i}.1.transformer_blocks.{{}}.") for i in range(_count(keys, "output_blocks.{}."))
    ][::-1]
    return {
        "model_channels": model_channels,
        "num_res_blocks": res_blocks,
        "channel_mult": channel_mult,
        "transformer_depth": depth_in,
        "transformer_depth_output": depth_out,
        "transformer_depth_middle": _count(keys, "middle_block.1.transformer_blocks.{}."),
    }


def _strip(shapes: dict[str, tuple[int, ...]]) -> dict[str, str]:
    """{network key: file key}: the keys under a diffusion-model prefix when the file has one, else all."""
    for prefix in _PREFIXES:
        inside = {k[len(prefix) :]: k for k in shapes if k.startswith(prefix)}
        if inside:
            return inside
    return {k: k for k in shapes}


def _from_diffusers(shapes: dict[str, tuple[int, ...]], names: dict[str, str]) -> dict[str, str]:
    """A diffusers-layout SD UNet's keys renamed to the LDM layout, as ComfyUI converts one when loading."""
    from comfy_bridge.compat.comfy.model_detection import unet_config_from_diffusers_unet
    from comfy_bridge.compat.comfy.unet_keys import unet_to_diffusers

    meta = {k: torch.empty(shapes[f], device="meta") for k, f in names.items()}
    config = unet_config_from_diffusers_unet(meta)
    if config is None:
        raise UnsupportedFeature("MODEL.model.state_dict()", "a diffusers-layout UNet of a kind ComfyUI does not know")
    return {f"{ldm}": names[dif] for dif, ldm in unet_to_diffusers(config).items() if dif in names}


def diffusion_model_state(arch: str, sources: tuple[str, ...]) -> tuple[LazyStateDict, ModelConfig]:
    """(state dict in ComfyUI's names, model_config) of a MODEL of `arch` stored in `sources`."""
    if arch not in UNET_ARCHS | NATIVE_ARCHS:
        raise UnsupportedFeature(
            f"MODEL.model.state_dict() of a {arch} model",
            "the network's ComfyUI key layout is read here for SD 1.x/2.x/XL, Wan 2.x and Qwen-Image models",
        )
    where: dict[str, tuple[str, str]] = {}
    layout: dict[str, tuple[int, ...]] = {}
    for path in sources:
        shapes = _header(path)
        names = _strip(shapes)
        if arch in UNET_ARCHS and "conv_in.weight" in names and "input_blocks.0.0.weight" not in names:
            names = _from_diffusers(shapes, names)
        where.update({f"diffusion_model.{k}": (path, f) for k, f in names.items()})
        layout.update({k: shapes[f] for k, f in names.items()})
    config = unet_layout(layout) if arch in UNET_ARCHS else {}
    return LazyStateDict(dict(sorted(where.items(), key=lambda kv: _natural(kv[0])))), ModelConfig(config)


def _natural(key: str) -> list:
    """Block indices ordered as numbers (input_blocks.2 before input_blocks.10), as a module lists them."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", key)]


# This backend's CLIP towers ("l", "g", "h": nodes.models.loader) and their names in ComfyUI's SD1/SD2/SDXL models.
TOWERS = {"l": "clip_l", "g": "clip_g", "h": "clip_h"}
# SDClipModel's logit_scale: ComfyUI's initial value, which its loaders never replace.
LOGIT_SCALE = 4.6055


def text_encoder_state(ref: Any) -> dict[str, torch.Tensor]:
    """A CLIP's cond_stage_model.state_dict() as ComfyUI's SD1/SD2/SDXL CLIP models name it: per tower
    "clip_<l|g|h>.transformer.text_model.<HF key>", its text_projection.weight (the identity where the files have
    none) and logit_scale; the weights as stored, before the CLIP's LoRAs."""
    from dataclasses import replace

    from nodes.models.errors import ModelLoadError
    from nodes.models.loader import text_encoder_weights

    try:
        _, weights = text_encoder_weights(replace(ref, patches=()))
    except ModelLoadError as e:
        raise UnsupportedFeature(
            f"CLIP.cond_stage_model.state_dict() of a {ref.arch} text encoder",
            f"ComfyUI's CLIP key layout is read here for SD 1.x/2.x/XL CLIP towers ({e})",
        ) from None
    out: dict[str, torch.Tensor] = {}
    for side in sorted({k.split("/")[0] for k in weights}):
        tower = {k.split("/", 1)[1]: v for k, v in weights.items() if k.startswith(side + "/")}
        name = TOWERS[side]
        dim = tower["final_layer_norm.weight"].shape[0]
        projection = tower.pop("text_projection.weight", None)
        out[f"{name}.logit_scale"] = torch.tensor(LOGIT_SCALE)
        out.update({f"{name}.transformer.text_model.{k}": v for k, v in tower.items()})
        out[f"{name}.transformer.text_projection.weight"] = projection if projection is not None else torch.eye(dim)
    return out
