"""LoRAs on Flux.1 transformers, merged in BFL's names (ComfyUI's: `double_blocks.N.img_attn.qkv`, ...) before the
conversion to diffusers' layout, as ComfyUI 0.10.0's comfy/lora.py maps a Flux model's keys: its own names under
`diffusion_model.` or kohya's `lora_unet_` with underscores, and `single_blocks.N.linear1_qkv` for the attention
rows of a single block's fused linear1 (its first 3 x hidden rows).

bytedance's USO DiT LoRA (Comfy-Org's repackaged uso-flux1-dit-lora-v1) is in its trainer's processor names
(`double_blocks.N.processor.qkv_lora1.down.weight`, ...): comfy/lora_convert.py recognises it by the keys of the
released depth (double block 18's qkv_lora2, single block 37's qkv_lora) and renames its modules onto the blocks'
layers: qkv_lora1 / proj_lora1 onto the image stream's qkv / proj, qkv_lora2 / proj_lora2 onto the text stream's,
a single block's qkv_lora onto linear1_qkv and its proj_lora onto the whole linear2 (the LoRA's input is linear2's,
attention output and MLP activation together). Its `down` / `up` are lora_down / lora_up without an alpha.

Not here: diffusers' / OneTrainer's / SimpleTuner's Flux names (`transformer.transformer_blocks.N.attn.to_q`, ...) and
BFL's control LoRAs (FLUX.1 Canny / Depth dev LoRAs: bias differences, set norms, a widened img_in); both are
refused by name."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from nodes.models.lora import LoraTargets, WeightSlice

# ComfyUI's test for a USO LoRA: the keys of the released model's last double and single blocks
USO_MARKERS = ("single_blocks.37.processor.qkv_lora.up.weight", "double_blocks.18.processor.qkv_lora2.up.weight")
_USO_MODULES = {
    "qkv_lora1": "img_attn.qkv",
    "proj_lora1": "img_attn.proj",
    "qkv_lora2": "txt_attn.qkv",
    "proj_lora2": "txt_attn.proj",
    "qkv_lora": "linear1_qkv",
    "proj_lora": "linear2",
}
_USO_PARTS = {"down.weight": "lora_down.weight", "up.weight": "lora_up.weight"}
# BFL's control LoRAs carry a bias difference for img_in and set norm scales (comfy/lora_convert.py's test)
CONTROL_MARKERS = ("img_in.lora_A.weight", "single_blocks.0.norm.key_norm.scale")


def convert(lora: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A USO LoRA in the names ComfyUI gives it (`diffusion_model.<block>.<layer>.lora_down.weight`); any other
    LoRA unchanged."""
    if not all(k in lora for k in USO_MARKERS):
        return lora
    out = {}
    for key, value in lora.items():
        block, sep, rest = key.partition(".processor.")
        module, _, part = rest.partition(".")
        if sep and module in _USO_MODULES and part in _USO_PARTS:
            key = f"{block}.{_USO_MODULES[module]}.{_USO_PARTS[part]}"
        out["diffusion_model." + key.replace(".processor.", ".")] = value
    return out


def is_control_lora(lora: Mapping[str, torch.Tensor]) -> bool:
    return all(k in lora for k in CONTROL_MARKERS)


def lora_targets(bfl_sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    """The names ComfyUI maps for a Flux LoRA, for a state dict in BFL's unprefixed names."""
    tops = tuple(sorted({k.split(".")[0] + "." for k in bfl_sd}))
    family = ("lora_unet_", "diffusion_model.", "transformer.", "lycoris_", "lora_transformer_") + tops
    targets = LoraTargets(family, {})
    hidden = bfl_sd["img_in.weight"].shape[0]
    for key in bfl_sd:
        if not key.endswith(".weight"):
            continue
        name = key[: -len(".weight")]
        targets.add(key, "diffusion_model." + name, "lora_unet_" + name.replace(".", "_"))
        if name.endswith(".linear1") and name.startswith("single_blocks."):
            targets.add(WeightSlice(key, 0, 0, 3 * hidden), f"diffusion_model.{name}_qkv")
    return targets
