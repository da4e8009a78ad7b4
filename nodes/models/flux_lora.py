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

Diffusers' names (ai-toolkit's and diffusers' `transformer.transformer_blocks.N.attn.to_q`, OneTrainer's
`lora_transformer_`, SimpleTuner's `lycoris_`, DiffSynth's bare names) map as comfy.utils.flux_to_diffusers maps them:
to_q / to_k / to_v (and add_q_proj ... for the text stream) onto their rows of the fused qkv, a single block's to_q /
to_k / to_v / proj_mlp onto their rows of linear1. Not here, refused by name: `norm_out.linear` (ComfyUI swaps its
scale and shift halves) and BFL's control LoRAs (FLUX.1 Canny / Depth dev LoRAs: set norms, a widened img_in)."""

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


_DOUBLE = {  # diffusers' name in a double block -> BFL's
    "attn.to_out.0": "img_attn.proj",
    "norm1.linear": "img_mod.lin",
    "norm1_context.linear": "txt_mod.lin",
    "attn.to_add_out": "txt_attn.proj",
    "ff.net.0.proj": "img_mlp.0",
    "ff.net.2": "img_mlp.2",
    "ff_context.net.0.proj": "txt_mlp.0",
    "ff_context.net.2": "txt_mlp.2",
    "ff.linear_in": "img_mlp.0",  # LyCORIS's LoKr names
    "ff.linear_out": "img_mlp.2",
    "ff_context.linear_in": "txt_mlp.0",
    "ff_context.linear_out": "txt_mlp.2",
}
_SINGLE = {
    "norm.linear": "modulation.lin",
    "proj_out": "linear2",
    "attn.to_qkv_mlp_proj": "linear1",
    "attn.to_out": "linear2",
}
_GLOBAL = {
    "proj_out": "final_layer.linear",
    "x_embedder": "img_in",
    "context_embedder": "txt_in",
    "time_text_embed.timestep_embedder.linear_1": "time_in.in_layer",
    "time_text_embed.timestep_embedder.linear_2": "time_in.out_layer",
    "time_text_embed.text_embedder.linear_1": "vector_in.in_layer",
    "time_text_embed.text_embedder.linear_2": "vector_in.out_layer",
    "time_text_embed.guidance_embedder.linear_1": "guidance_in.in_layer",
    "time_text_embed.guidance_embedder.linear_2": "guidance_in.out_layer",
}


def diffusers_names(bfl_sd: Mapping[str, torch.Tensor]) -> dict[str, str | WeightSlice]:
    """diffusers' layer names -> the BFL weight or its rows (comfy.utils.flux_to_diffusers' map, weights only)."""
    hidden = bfl_sd["img_in.weight"].shape[0]
    out: dict[str, str | WeightSlice] = {}

    def rows(key: str, names: tuple[str, ...], prefix: str, start: int = 0) -> None:
        for i, name in enumerate(names):
            out[f"{prefix}{name}"] = WeightSlice(key, 0, start + i * hidden, hidden)

    blocks = {int(k.split(".")[1]) for k in bfl_sd if k.startswith("double_blocks.")}
    for i in sorted(blocks):
        d, b = f"transformer_blocks.{i}.", f"double_blocks.{i}."
        rows(b + "img_attn.qkv.weight", ("to_q", "to_k", "to_v"), d + "attn.")
        rows(b + "txt_attn.qkv.weight", ("add_q_proj", "add_k_proj", "add_v_proj"), d + "attn.")
        out.update({d + k: b + v + ".weight" for k, v in _DOUBLE.items()})
    for i in sorted({int(k.split(".")[1]) for k in bfl_sd if k.startswith("single_blocks.")}):
        d, b = f"single_transformer_blocks.{i}.", f"single_blocks.{i}."
        rows(b + "linear1.weight", ("to_q", "to_k", "to_v"), d + "attn.")
        out[d + "proj_mlp"] = WeightSlice(b + "linear1.weight", 0, 3 * hidden, 4 * hidden)
        out.update({d + k: b + v + ".weight" for k, v in _SINGLE.items()})
    out.update({k: v + ".weight" for k, v in _GLOBAL.items()})
    return {k: v for k, v in out.items() if (v.key if isinstance(v, WeightSlice) else v) in bfl_sd}


def lora_targets(bfl_sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    """The names ComfyUI maps for a Flux LoRA, for a state dict in BFL's unprefixed names."""
    tops = tuple(sorted({k.split(".")[0] + "." for k in bfl_sd}))
    family = ("lora_unet_", "diffusion_model.", "transformer.", "lycoris_", "lora_transformer_") + tops
    diffusers = diffusers_names(bfl_sd)
    family += tuple(sorted({d.split(".")[0] + "." for d in diffusers}))  # DiffSynth's bare diffusers names
    targets = LoraTargets(family, {})
    hidden = bfl_sd["img_in.weight"].shape[0]
    for key in bfl_sd:
        if not key.endswith(".weight"):
            continue
        name = key[: -len(".weight")]
        targets.add(key, "diffusion_model." + name, "lora_unet_" + name.replace(".", "_"))
        if name.endswith(".linear1") and name.startswith("single_blocks."):
            targets.add(WeightSlice(key, 0, 0, 3 * hidden), f"diffusion_model.{name}_qkv")
    for d, target in diffusers.items():
        flat = d.replace(".", "_")
        targets.add(target, "transformer." + d, "lycoris_" + flat, "lora_transformer_" + flat, d)
    return targets
