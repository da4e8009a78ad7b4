"""The state dicts CheckpointSave / ModelSave / CLIPSave / VAESave write, in the ldm layout ComfyUI writes
and every SD loader (ours included) reads: `model.diffusion_model.*`, `cond_stage_model.*` /
`conditioner.embedders.*`, `first_stage_model.*`; text-encoder files in HF layout, VAE files in ldm layout.

Tensors no patch or merge touched keep their stored dtype (bit-identical to the source file); changed ones
are written in float32, the precision they were computed and run in, so a saved merge loads back to
exactly the weights of the merged ref."""

from __future__ import annotations

import torch

from cluster.refs import ModelRef

from . import clip as clip_mod
from . import vae as vae_mod
from .detect import probe
from .errors import ModelLoadError
from .loader import text_encoder_weights, unet_weights
from .safetensors_io import load_state_dict
from .unet import LDM_UNET_PREFIX, strip_prefix

# Where each CLIP tower of a checkpoint goes, per architecture: (side, key prefix, OpenCLIP layout).
_CHECKPOINT_TOWERS = {
    "sd1": (("l", "cond_stage_model.transformer.", False),),
    "sd2": (("h", "cond_stage_model.model.", True),),
    "sdxl": (("l", "conditioner.embedders.0.transformer.", False), ("g", "conditioner.embedders.1.model.", True)),
    "sdxl_refiner": (("g", "conditioner.embedders.0.model.", True),),
}


def diffusion_model_state(ref: ModelRef) -> tuple[str, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(arch, checkpoint-keyed UNet weights, extra marker keys such as `v_pred`) of a MODEL ref."""
    w = unet_weights(ref)
    sd = {LDM_UNET_PREFIX + w.names[k]: v for k, v in w.dsd.items()}
    extra = {k: w.sd[k] for k in ("v_pred", "ztsnr") if k in w.sd}
    return w.arch, sd, extra


def _hf(side: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Flattened tower keys -> transformers' CLIPTextModel(WithProjection) names."""
    return {(k if k.startswith("text_projection") else "text_model." + k): v for k, v in side.items()}


def text_encoder_sides(ref: ModelRef) -> tuple[str, dict[str, dict[str, torch.Tensor]]]:
    """(arch, {side ("l", "h", "g"): HF-layout tower weights}) of a CLIP ref."""
    arch, combined = text_encoder_weights(ref)
    sides: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in combined.items():
        side, name = key.split("/", 1)
        sides.setdefault(side, {})[name] = value
    return arch, {side: _hf(sd) for side, sd in sides.items()}


def text_encoder_checkpoint_state(ref: ModelRef, arch: str) -> dict[str, torch.Tensor]:
    """A CLIP ref's weights under the checkpoint keys of `arch` (the model's architecture)."""
    clip_arch, sides = text_encoder_sides(ref)
    if clip_arch != arch:
        raise ModelLoadError(ref.sources[0], f"a {clip_arch} text encoder cannot be saved in a {arch} checkpoint")
    out: dict[str, torch.Tensor] = {}
    for side, prefix, open_clip in _CHECKPOINT_TOWERS[arch]:
        tower = clip_mod.hf_to_open_clip(sides[side]) if open_clip else sides[side]
        out.update({prefix + k: v for k, v in tower.items()})
    return out


def vae_state(ref: ModelRef) -> dict[str, torch.Tensor]:
    """A VAE ref's weights in ldm layout without prefix (ComfyUI's VAE state dict)."""
    path = ref.sources[0]
    info = probe(path)
    if info.kind == "diffusers" or "vae" not in info.components:
        raise ModelLoadError(path, "saving this VAE is not supported (a single-file VAE or checkpoint is needed)")
    sd = load_state_dict(path, ref.digests[0] if ref.digests else None)
    prefix = info.prefix if info.kind == "vae" else vae_mod.LDM_VAE_PREFIX
    vsd = strip_prefix(sd, prefix) if prefix else dict(sd)
    return vae_mod.diffusers_to_ldm(vsd) if vae_mod.is_diffusers_layout(vsd) else vsd
