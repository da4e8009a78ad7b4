"""Hunyuan Image 2.1 diffusion models (diffusion_models/hunyuanimage2.1*.safetensors): HunyuanVideo's dual- then
single-stream DiT on 64-channel latents at 1/32 of the image, fed Qwen2.5-VL text states through a token refiner
(and, when the file has `byt5_in`, ByT5 glyph states through a small MLP).

Detection: ComfyUI 0.3.64's model_detection (`txt_in.individual_token_refiner.blocks.0.norm1.weight`, image_model
"hunyuan_video"), told from HunyuanVideo by a 2-D patch embedder (`img_in.proj.weight` of rank 4) and no
`vector_in` (supported_models.HunyuanImage21 asks vec_in_dim None). The file is in the authors' names
(`double_blocks.N.img_attn_qkv`, `img_mod.linear`, `img_mlp.fc1`, `single_blocks.N.linear1`, `txt_in.t_embedder.mlp.0`,
`final_layer.adaLN_modulation.1`), which ComfyUI renames on load; this module maps them to diffusers'
HunyuanImageTransformer2DModel (fused projections split, the final modulation's shift/scale halves swapped), the
config read from the shapes with ComfyUI's fixed choices: 128-wide heads, rotary axes 64 + 64, theta 256, MLP ratio 4.

`apply` drives it with ComfyUI's model semantics (model_base.HunyuanImage21): a [B,64,H,W] latent, the timestep
sigma x 1000 (ModelSamplingDiscreteFlow, shift 5), the text states unmasked unless the conditioning carries a mask.
The guidance-distilled 2.1 (hunyuanimage2.1_distilled: `guidance_in` and the meanflow `time_r_in`) takes, as
ComfyUI's does, the conditioning's guidance (6 unless FluxGuidance sets it) embedded at 1000x, and averages the
step's time embedding with that of the next sigma of the sampler's schedule (x 1000) when the step's sigma is on it.
The refiner (3-D patches) is refused by name: it is not supported yet.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.arch import latent_format, sampling_config
from nodes.models.components import DiffusionModel
from nodes.models.errors import ModelLoadError
from nodes.models.flux_keys import count_blocks, find_prefix, strip_prefix
from nodes.models.lora import LoraTargets
from nodes.models.single_file import load_single_file_transformer

MARKER = "txt_in.individual_token_refiner.blocks.0.norm1.weight"
HEAD = 128  # ComfyUI's head width for HunyuanVideo-family DiTs (num_heads = hidden // 128)
ROPE_AXES = (64, 64)
THETA = 256.0
MLP_RATIO = 4.0
# Byte-for-name renames of the authors' file (whole name parts, after the block index).
_REFINER = {
    "norm1.": "norm1.",
    "norm2.": "norm2.",
    "self_attn_proj.": "attn.to_out.0.",
    "mlp.fc1.": "ff.net.0.proj.",
    "mlp.fc2.": "ff.net.2.",
    "adaLN_modulation.1.": "norm_out.linear.",
}
_DOUBLE = {
    "img_mod.linear.": "norm1.linear.",
    "txt_mod.linear.": "norm1_context.linear.",
    "img_attn_q_norm.": "attn.norm_q.",
    "img_attn_k_norm.": "attn.norm_k.",
    "img_attn_proj.": "attn.to_out.0.",
    "img_mlp.fc1.": "ff.net.0.proj.",
    "img_mlp.fc2.": "ff.net.2.",
    "txt_attn_q_norm.": "attn.norm_added_q.",
    "txt_attn_k_norm.": "attn.norm_added_k.",
    "txt_attn_proj.": "attn.to_add_out.",
    "txt_mlp.fc1.": "ff_context.net.0.proj.",
    "txt_mlp.fc2.": "ff_context.net.2.",
}
_SINGLE = {
    "modulation.linear.": "norm.linear.",
    "q_norm.": "attn.norm_q.",
    "k_norm.": "attn.norm_k.",
    "linear2.": "proj_out.",
}
_TOP = {
    "img_in.proj.": "x_embedder.proj.",
    "txt_in.input_embedder.": "context_embedder.proj_in.",
    "txt_in.t_embedder.mlp.0.": "context_embedder.time_text_embed.timestep_embedder.linear_1.",
    "txt_in.t_embedder.mlp.2.": "context_embedder.time_text_embed.timestep_embedder.linear_2.",
    "txt_in.c_embedder.linear_1.": "context_embedder.time_text_embed.text_embedder.linear_1.",
    "txt_in.c_embedder.linear_2.": "context_embedder.time_text_embed.text_embedder.linear_2.",
    "time_in.mlp.0.": "time_guidance_embed.timestep_embedder.linear_1.",
    "time_in.mlp.2.": "time_guidance_embed.timestep_embedder.linear_2.",
    "time_r_in.mlp.0.": "time_guidance_embed.timestep_embedder_r.linear_1.",
    "time_r_in.mlp.2.": "time_guidance_embed.timestep_embedder_r.linear_2.",
    "guidance_in.mlp.0.": "time_guidance_embed.guidance_embedder.linear_1.",
    "guidance_in.mlp.2.": "time_guidance_embed.guidance_embedder.linear_2.",
    "byt5_in.layernorm.": "context_embedder_2.norm.",
    "byt5_in.fc1.": "context_embedder_2.linear_1.",
    "byt5_in.fc2.": "context_embedder_2.linear_2.",
    "byt5_in.fc3.": "context_embedder_2.linear_3.",
    "final_layer.linear.": "proj_out.",
}


def authors_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The file's tensors in the authors' names, unprefixed (bare or under `model.diffusion_model.`)."""
    prefix = find_prefix(state_dict.keys(), MARKER)
    if prefix is None:
        raise ValueError(f"not a Hunyuan Image 2.1 state dict (no {MARKER})")
    sd = strip_prefix(state_dict, prefix)
    if "double_blocks.0.img_attn.qkv.weight" in sd:
        raise ValueError("the file is in ComfyUI's internal names (img_attn.qkv), not the published layout")
    return sd


def _rename(rest: str, table: Mapping[str, str]) -> str | None:
    for old, new in table.items():
        if rest.startswith(old):
            return new + rest[len(old) :]
    return None


def to_diffusers_layout(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """diffusers' names for an authors'-layout state dict: the fused q/k/v (and the single blocks' q/k/v/MLP input)
    split in that order, the final layer's (shift, scale) modulation rows stored as (scale, shift)."""
    out: dict[str, torch.Tensor] = {}
    unknown = []
    for key, value in sd.items():
        parts = key.split(".")
        if key.startswith("txt_in.individual_token_refiner.blocks."):
            base, rest = f"context_embedder.token_refiner.refiner_blocks.{parts[3]}.", ".".join(parts[4:])
            if rest.startswith("self_attn_qkv."):
                suffix = rest[len("self_attn_qkv.") :]
                for name, chunk in zip(("to_q", "to_k", "to_v"), value.chunk(3), strict=True):
                    out[f"{base}attn.{name}.{suffix}"] = chunk
                continue
            new = _rename(rest, _REFINER)
        elif key.startswith("double_blocks."):
            base, rest = f"transformer_blocks.{parts[1]}.", ".".join(parts[2:])
            if rest.startswith(("img_attn_qkv.", "txt_attn_qkv.")):
                names = ("to_q", "to_k", "to_v") if rest[0] == "i" else ("add_q_proj", "add_k_proj", "add_v_proj")
                suffix = rest[len("img_attn_qkv.") :]
                for name, chunk in zip(names, value.chunk(3), strict=True):
                    out[f"{base}attn.{name}.{suffix}"] = chunk
                continue
            new = _rename(rest, _DOUBLE)
        elif key.startswith("single_blocks."):
            base, rest = f"single_transformer_blocks.{parts[1]}.", ".".join(parts[2:])
            if rest.startswith("linear1."):
                hidden = sd[f"single_blocks.{parts[1]}.linear2.weight"].shape[0]
                q, k, v, mlp = value.split([hidden, hidden, hidden, value.shape[0] - 3 * hidden])
                suffix = rest[len("linear1.") :]
                for name, chunk in (("attn.to_q", q), ("attn.to_k", k), ("attn.to_v", v), ("proj_mlp", mlp)):
                    out[f"{base}{name}.{suffix}"] = chunk
                continue
            new = _rename(rest, _SINGLE)
        elif key.startswith("final_layer.adaLN_modulation.1."):
            shift, scale = value.chunk(2)
            out["norm_out.linear." + parts[-1]] = torch.cat([scale, shift])
            continue
        else:
            base, new = "", _rename(key, _TOP)
        if new is None:
            unknown.append(key)
            continue
        out[base + new] = value
    if unknown:
        raise ValueError(f"tensors of no Hunyuan Image 2.1 layer: {', '.join(sorted(unknown)[:4])}")
    return out


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """HunyuanImageTransformer2DModel's config from a diffusers-layout state dict's shapes and ComfyUI's fixed
    choices (128-wide heads, rotary axes 64 + 64, theta 256, MLP ratio 4, two token-refiner blocks read)."""
    patch = sd["x_embedder.proj.weight"]
    hidden = int(patch.shape[0])
    if hidden % HEAD:
        raise ValueError(f"width {hidden} is not a multiple of the {HEAD}-wide heads")
    mlp = int(sd["transformer_blocks.0.ff.net.0.proj.weight"].shape[0])
    if mlp != int(hidden * MLP_RATIO):
        raise ValueError(f"MLP width {mlp} is not {MLP_RATIO:g} x the width {hidden}")
    patch_size = tuple(int(s) for s in patch.shape[2:])
    out_channels = int(sd["proj_out.weight"].shape[0]) // math.prod(patch_size)
    byt5 = sd.get("context_embedder_2.linear_1.weight")
    return {
        "in_channels": int(patch.shape[1]),
        "out_channels": out_channels,
        "num_attention_heads": hidden // HEAD,
        "attention_head_dim": HEAD,
        "num_layers": count_blocks(sd, "transformer_blocks"),
        "num_single_layers": count_blocks(sd, "single_transformer_blocks"),
        "num_refiner_layers": count_blocks(sd, "context_embedder.token_refiner.refiner_blocks"),
        "mlp_ratio": MLP_RATIO,
        "patch_size": patch_size,
        "guidance_embeds": "time_guidance_embed.guidance_embedder.linear_1.weight" in sd,
        "text_embed_dim": int(sd["context_embedder.proj_in.weight"].shape[1]),
        "text_embed_2_dim": None if byt5 is None else int(byt5.shape[1]),
        "rope_theta": THETA,
        "rope_axes_dim": ROPE_AXES,
        "use_meanflow": "time_guidance_embed.timestep_embedder_r.linear_1.weight" in sd,
    }


def lora_targets(sd: Mapping[str, torch.Tensor]) -> LoraTargets:
    """The names a LoRA may give a layer: the file's own (bare or under `diffusion_model.`)."""
    targets = LoraTargets(("diffusion_model.",) + tuple(sorted({k.split(".")[0] + "." for k in sd})), {})
    for key, value in sd.items():
        if key.endswith(".weight") and value.dim() == 2:
            name = key[: -len(".weight")]
            targets.add(key, name, "diffusion_model." + name)
    return targets


def next_sigma(sigma: float, schedule: torch.Tensor | None) -> float | None:
    """The sigma after `sigma` in the sampler's schedule, or None where `sigma` is not on it (ComfyUI's meanflow
    models then add no second time embedding: outside a sampling loop, or a sigma the schedule lacks)."""
    if schedule is None:
        return None
    values = schedule.reshape(-1).tolist()
    for i, s in enumerate(values[:-1]):
        if abs(s - sigma) <= 1e-6 * max(1.0, abs(sigma)):
            return values[i + 1]
    return None


@dataclass
class HunyuanImageDiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control"):
            raise NotImplementedError("ControlNets are not supported for Hunyuan Image 2.1 models")
        if cond.get("ref_latents"):
            raise NotImplementedError("reference latents are not supported for Hunyuan Image 2.1 models")
        module = self.module
        if x.dim() != 4:
            raise ValueError(f"Hunyuan Image 2.1 takes [B,64,H,W] latents; this one is {tuple(x.shape)}")
        b = x.shape[0]
        context = cond["context"].to(x.device, self.dtype)
        context = context.expand(b, -1, -1) if context.shape[0] == 1 and b > 1 else context
        mask = cond.get("attention_mask")
        if mask is None:
            mask = torch.ones(context.shape[:2], dtype=torch.bool, device=x.device)
        else:
            mask = mask.to(x.device).bool().reshape(-1, context.shape[1]).expand(b, -1)
        t = torch.as_tensor(timestep, dtype=torch.float32, device=x.device).reshape(-1)
        t = t.expand(b) if t.numel() == 1 else t
        extra: dict[str, Any] = {}
        byt5 = cond.get("conditioning_byt5small")
        if byt5 is not None and module.context_embedder_2 is not None:
            byt5 = byt5.to(x.device, self.dtype)
            byt5 = byt5.expand(b, -1, -1) if byt5.shape[0] == 1 and b > 1 else byt5
            extra["encoder_hidden_states_2"] = byt5
            extra["encoder_attention_mask_2"] = torch.ones(byt5.shape[:2], dtype=torch.bool, device=x.device)
        if module.config.guidance_embeds:
            if cond.get("guidance_disabled"):
                raise NotImplementedError("FluxDisableGuidance is not supported for the distilled Hunyuan Image 2.1")
            # ComfyUI: the conditioning's guidance (6 unless set), embedded at 1000x as its timestep_embedding does
            guidance = torch.as_tensor(cond.get("guidance", 6.0), dtype=torch.float32, device=x.device).reshape(-1)
            extra["guidance"] = (guidance * 1000.0).expand(b)
        if module.config.use_meanflow:  # the timestep is sigma x 1000 (FLOW sampling)
            target = next_sigma(float(t[0]) / 1000.0, cond.get("sample_sigmas"))
            if target is not None:
                extra["timestep_r"] = torch.full((b,), target * 1000.0, device=x.device)
        out = module(
            hidden_states=x.to(self.dtype),
            timestep=t,
            encoder_hidden_states=context,
            encoder_attention_mask=mask,
            return_dict=False,
            **extra,
        )[0]
        return out.float()


@dataclass
class HunyuanImageMeanflowModel(HunyuanImageDiffusionModel):
    reads_schedule = True  # the distilled model's second time embedding is the next sigma's


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> HunyuanImageDiffusionModel:
    """A Hunyuan Image 2.1 DiffusionModel (the distilled one too) from its published file, computed in float32. The
    refiner (3-D patches) and LoRAs are refused by name."""
    from diffusers import HunyuanImageTransformer2DModel
    from diffusers.models.transformers.transformer_hunyuanimage import HunyuanImageByT5TextProjection

    if ref.patches:  # ComfyUI keys them by its own renamed layers (img_attn.qkv, ...): not mapped here yet
        raise ModelLoadError(
            ref.sources[0] if ref.sources else None, "LoRAs on Hunyuan Image 2.1 models are not supported yet"
        )

    byt5_hidden: list[int] = []  # the glyph mapper's width, read with the config (diffusers fixes it at 2048)

    def checked(sd: dict[str, torch.Tensor]) -> dict[str, Any]:
        config = infer_config(sd)
        if len(config["patch_size"]) != 2:
            raise ValueError("the Hunyuan Image 2.1 refiner is not supported yet")
        if config["text_embed_2_dim"] is not None:
            byt5_hidden.append(int(sd["context_embedder_2.linear_1.weight"].shape[0]))
        return config

    def build(**config: Any) -> torch.nn.Module:
        module = HunyuanImageTransformer2DModel(**config)
        if byt5_hidden and byt5_hidden[0] != module.context_embedder_2.linear_2.in_features:
            module.context_embedder_2 = HunyuanImageByT5TextProjection(
                config["text_embed_2_dim"], byt5_hidden[0], module.config.num_attention_heads * HEAD
            )
        return module

    module, config = load_single_file_transformer(
        ref,
        state_dict,
        what="Hunyuan Image 2.1 transformer",
        layout=authors_layout,
        lora_targets=lora_targets,
        convert=to_diffusers_layout,
        infer_config=checked,
        model_class=build,
    )
    model_class = HunyuanImageMeanflowModel if config["use_meanflow"] else HunyuanImageDiffusionModel
    return model_class(
        arch="hunyuan_image",
        module=module,
        latent_format=latent_format("hunyuan_image"),
        sampling=dict(sampling_config("hunyuan_image")),
        config=config,
    )


# The loader (nodes.models.loader) finds every Hunyuan Image entry point on this module.
from nodes.models.hunyuan_image_text import load_text_encoder  # noqa: E402
from nodes.models.hunyuan_image_vae import load_vae  # noqa: E402

__all__ = [
    "authors_layout",
    "infer_config",
    "load_diffusion_model",
    "load_text_encoder",
    "load_vae",
    "lora_targets",
    "next_sigma",
    "to_diffusers_layout",
]
