"""Stable Cascade (Würstchen v3): the stage C prior and the stage B decoder UNets in Stability's published key layout
(`clf.1.weight` with `clip_txt_mapper` for stage C, `clip_mapper` for stage B: ComfyUI's model_detection), bare,
under `model.diffusion_model.` or in ComfyUI's all-in-one checkpoints (`text_encoder.` CLIP-G, `vae.` stage A or
the stage C coder: ComfyUI's supported_models.Stable_Cascade_C/_B prefixes).

Both stages run on diffusers' StableCascadeUNet. The file's fused `attention.attn.in_proj_*` (nn.MultiheadAttention's
names, kept by the published files) are split into to_q/to_k/to_v as ComfyUI splits them; `out_proj` is diffusers'
`to_out.0`; stage B's `clip_mapper` is diffusers' `clip_txt_pooled_mapper`. Sizes come from the shapes: widths,
block counts, repeat mappers, which levels attend, the patch size (16 latent channels in for C, 4 for B, as ComfyUI
fixes them); heads are 64 wide (ComfyUI's configs: 2048/32, 1536/24, 1280/20).

`apply` takes ComfyUI's view: the timestep is the cosine schedule's t in [0, 1] (ModelType.STABLE_CASCADE, eps);
stage C reads the CLIP-G states as clip_text, the pooled output as clip_text_pooled and unCLIPConditioning's image
embeds times their strengths as clip_img (zeros without: ComfyUI's model_base.StableCascade_C); stage B reads the pooled output and the stage C latent
StableCascade_StageB_Conditioning put beside the prompt (zeros without it, as ComfyUI)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.arch import LATENT_FORMATS, sampling_config
from nodes.models.components import DiffusionModel
from nodes.models.errors import ModelLoadError

STAGE_C, STAGE_B = "stable_cascade_c", "stable_cascade_b"
MARKER = "clf.1.weight"
STAGE_C_MARKER = "clip_txt_mapper.weight"
STAGE_B_MARKER = "clip_mapper.weight"
PREFIXES = ("model.diffusion_model.", "")
HEAD_WIDTH = 64
LATENT_IN = {STAGE_C: 16, STAGE_B: 4}
BLOCK_NAMES = {"C": "SDCascadeResBlock", "T": "SDCascadeTimestepBlock", "A": "SDCascadeAttnBlock"}


def stage_of(keys, prefix: str = "") -> str | None:
    """STAGE_C, STAGE_B or None for a state dict's keys under `prefix`."""
    keys = set(keys)
    if prefix + MARKER not in keys:
        return None
    if prefix + STAGE_C_MARKER in keys:
        return STAGE_C
    return STAGE_B if prefix + STAGE_B_MARKER in keys else None


def find_prefix(keys) -> str | None:
    keys = set(keys)
    return next((p for p in PREFIXES if stage_of(keys, p) is not None), None)


def to_diffusers_layout(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Stability's (or ComfyUI's already split) names -> diffusers' StableCascadeUNet names."""
    prefix = find_prefix(state_dict.keys())
    if prefix is None:
        raise ValueError("not a Stable Cascade stage B or C UNet (no clf.1 / clip mapper keys)")
    out: dict[str, torch.Tensor] = {}
    for key, v in state_dict.items():
        if not key.startswith(prefix):
            continue
        k = key[len(prefix) :]
        if k.endswith(("attention.attn.in_proj_weight", "attention.attn.in_proj_bias")):
            base, leaf = k.split("attn.in_proj_")[0], k.rsplit("_", 1)[1]
            for name, part in zip(("to_q", "to_k", "to_v"), v.chunk(3)):
                out[f"{base}{name}.{leaf}"] = part
            continue
        k = k.replace("attention.attn.out_proj.", "attention.to_out.0.").replace("attention.attn.", "attention.")
        if k.startswith("clip_mapper."):
            k = "clip_txt_pooled_mapper." + k[len("clip_mapper.") :]
        out[k] = v
    return out


def _count(sd: Mapping[str, Any], prefix: str) -> int:
    return len({k[len(prefix) :].split(".")[0] for k in sd if k.startswith(prefix)})


def _block_kinds(sd: Mapping[str, Any], prefix: str) -> list[str]:
    kinds = []
    for j in range(_count(sd, prefix)):
        p = f"{prefix}{j}."
        if p + "depthwise.weight" in sd:
            kinds.append("C")
        elif p + "mapper.weight" in sd:
            kinds.append("T")
        elif p + "kv_mapper.1.weight" in sd:
            kinds.append("A")
        else:
            raise ValueError(f"block {prefix}{j} is neither a residual, timestep nor attention block")
    return kinds


def infer_config(sd: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """StableCascadeUNet's config from diffusers-named tensors."""
    stage = STAGE_C if STAGE_C_MARKER in sd else STAGE_B
    levels = _count(sd, "down_blocks.")
    widths = [int(sd[f"down_blocks.{i}.0.depthwise.weight"].shape[0]) for i in range(levels)]
    cycles, down = [], []
    for i in range(levels):
        kinds = _block_kinds(sd, f"down_blocks.{i}.")
        cycle = kinds[: kinds.index("C", 1)] if "C" in kinds[1:] else kinds
        if len(kinds) % len(cycle) or kinds != cycle * (len(kinds) // len(cycle)):
            raise ValueError(f"level {i} does not repeat one block pattern")
        cycles.append(cycle)
        down.append(len(kinds) // len(cycle))
    up = [_count(sd, f"up_blocks.{j}.") // len(cycles[levels - 1 - j]) for j in range(levels)]
    patch = int(round((sd["embedding.1.weight"].shape[1] // LATENT_IN[stage]) ** 0.5))

    def width_of(name: str) -> int | None:
        t = sd.get(name)
        return None if t is None else int(t.shape[1])

    return {
        "in_channels": LATENT_IN[stage],
        "out_channels": int(sd["clf.1.weight"].shape[0]) // (patch * patch),
        "timestep_ratio_embedding_dim": int(sd["down_blocks.0.1.mapper.weight"].shape[1]),
        "patch_size": patch,
        "conditioning_dim": int(sd["clip_txt_pooled_mapper.weight"].shape[0]) // 4,
        "block_out_channels": tuple(widths),
        "num_attention_heads": tuple(max(w // HEAD_WIDTH, 1) if "A" in c else -1 for w, c in zip(widths, cycles)),
        "down_num_layers_per_block": tuple(down),
        "up_num_layers_per_block": tuple(up),
        "down_blocks_repeat_mappers": tuple(_count(sd, f"down_repeat_mappers.{i}.") + 1 for i in range(levels)),
        "up_blocks_repeat_mappers": tuple(_count(sd, f"up_repeat_mappers.{j}.") + 1 for j in range(levels)),
        "block_types_per_layer": tuple(tuple(BLOCK_NAMES[k] for k in c) for c in cycles),
        "clip_text_in_channels": width_of("clip_txt_mapper.weight"),
        "clip_text_pooled_in_channels": width_of("clip_txt_pooled_mapper.weight"),
        "clip_image_in_channels": width_of("clip_img_mapper.weight"),
        "effnet_in_channels": width_of("effnet_mapper.0.weight"),
        "pixel_mapper_in_channels": width_of("pixels_mapper.0.weight"),
        "dropout": (0.0,) * levels,
        "self_attn": True,
        "timestep_conditioning_type": ("sca", "crp") if "down_blocks.0.1.mapper_crp.weight" in sd else ("sca",),
        # Stage C keeps its resolution between levels (ComfyUI's switch_level [False]); stage B strides by 2.
        "switch_level": (False,) if stage == STAGE_C else None,
    }


def _batched(t: torch.Tensor, b: int) -> torch.Tensor:
    return t.expand(b, *t.shape[1:]) if t.shape[0] == 1 and b > 1 else t


@dataclass
class StableCascadeDiffusionModel(DiffusionModel):
    def apply(self, x: torch.Tensor, timestep: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
        if cond.get("control") is not None:
            raise NotImplementedError("ControlNets are not supported for Stable Cascade models yet")
        device, dtype, b = x.device, self.dtype, x.shape[0]
        t = torch.as_tensor(timestep, dtype=torch.float32).reshape(-1).to(device)
        t = t.expand(b) if t.numel() == 1 else t
        pooled = _batched(cond["pooled"].to(device, dtype), b).reshape(b, 1, -1)
        kwargs: dict[str, Any] = {"clip_text_pooled": pooled}
        if self.arch == STAGE_C:
            kwargs["clip_text"] = _batched(cond["context"].to(device, dtype), b)
            clip_img = cond.get("clip_img")  # unCLIPConditioning's image embeds; zeros without (ComfyUI's)
            if clip_img is None:
                clip_img = torch.zeros(1, 1, self.config["clip_image_in_channels"])
            kwargs["clip_img"] = _batched(clip_img.to(device, dtype), b)
        else:
            prior = cond.get("stable_cascade_prior")
            if prior is None:  # ComfyUI's default: zeros, resized by the network anyway
                prior = torch.zeros(1, 16, x.shape[2] * 4 // 42, x.shape[3] * 4 // 42)
            kwargs["effnet"] = _batched(prior.to(device, dtype), b)
        out = self.module(x.to(dtype), t.to(dtype), return_dict=False, **kwargs)[0]
        return out.float()


def load_diffusion_model(ref: ModelRef, state_dict: Mapping[str, torch.Tensor]) -> StableCascadeDiffusionModel:
    """A stage C or stage B DiffusionModel from a bare UNet file or an all-in-one checkpoint."""
    from diffusers.models.unets.unet_stable_cascade import StableCascadeUNet

    from nodes.models.safetensors_io import build_module

    path = ref.sources[0] if ref.sources else None
    if ref.patches:
        raise ModelLoadError(path, "LoRAs on Stable Cascade models are not supported yet")
    prefix = find_prefix(state_dict.keys())
    stage = stage_of(state_dict.keys(), prefix or "")
    try:
        sd = to_diffusers_layout(state_dict)
        config = infer_config(sd)
    except (KeyError, ValueError) as e:
        raise ModelLoadError(path, f"not a usable Stable Cascade UNet: {e}") from None
    # ComfyUI computes in float32 on the CPU (stage C allows bf16/fp32, stage B also fp16, on a GPU).
    sd = {k: v.float() for k, v in sd.items()}
    module = build_module(
        lambda: StableCascadeUNet(**config).requires_grad_(False), sd, path, f"Stable Cascade stage {stage[-1].upper()}"
    )
    return StableCascadeDiffusionModel(
        arch=stage,
        module=module.eval(),
        latent_format=LATENT_FORMATS[stage],
        sampling=dict(sampling_config(stage)),
        config=dict(config),
    )


# The loader (nodes.models.loader) finds every Stable Cascade entry point on this module.
from nodes.models.stable_cascade_text import load_text_encoder  # noqa: E402
from nodes.models.stable_cascade_vae import load_vae  # noqa: E402

__all__ = ["infer_config", "load_diffusion_model", "load_text_encoder", "load_vae", "to_diffusers_layout"]
