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
from . import clip_vision as clip_vision_mod
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


# Where ComfyUI 0.3.64 writes an SVD checkpoint's image encoder (supported_models.SVD_img2vid.clip_vision_prefix). It
# writes the encoder's own state dict there, in transformers' names, not the OpenCLIP names Stability's files use;
# both its loader and ours read either.
SVD_CLIP_VISION_PREFIX = "conditioner.embedders.0.open_clip.model.visual."
# The model-sampling kinds ComfyUI's save_checkpoint sees as ModelSamplingContinuousEDM (ModelSamplingContinuousV is
# one) and the predictions that are V_PREDICTION (EDM is one): such a model's sigma range is saved beside it.
_EDM_KINDS, _V_PREDICTIONS = ("continuous_edm", "continuous_v"), ("v", "edm")


def clip_vision_state(ref: ModelRef) -> dict[str, torch.Tensor]:
    """A CLIP vision ref's tower in transformers' names, float16: the state dict of the encoder ComfyUI builds."""
    path = ref.sources[0]
    sd = clip_vision_mod.to_transformers_layout(load_state_dict(path, ref.digests[0] if ref.digests else None))
    if "vision_model.embeddings.class_embedding" not in sd:
        raise ModelLoadError(path, "saving this image encoder is not supported (a CLIP ViT vision tower is needed)")
    return {
        k: v.to(torch.float16) if v.is_floating_point() else v
        for k, v in sd.items()
        if (k.startswith("vision_model.") and not k.endswith("position_ids")) or k == "visual_projection.weight"
    }


def svd_checkpoint_state(
    model: ModelRef, clip_vision: ModelRef | None, vae: ModelRef | None
) -> dict[str, torch.Tensor]:
    """An SVD MODEL's VideoUNet (`model.diffusion_model.*`), the CLIP vision tower and the VAE (`first_stage_model.*`)
    in the keys ComfyUI's ImageOnlyCheckpointSave writes, and the `edm_vpred.sigma_*` entries it adds for a
    v-prediction EDM sampling. The UNet and VAE tensors keep their stored dtype (ComfyUI writes the dtype it ran
    them in, float32 on a CPU): their values are the file's."""
    from nodes.modelfns.model_options import sampling_config
    from nodes.sampling.model_sampling import model_sampling_from_config

    path = model.sources[0]
    info = probe(path)
    if info.arch != "svd" or "diffusion_model" not in info.components:
        raise ModelLoadError(path, f"ImageOnlyCheckpointSave saves Stable Video Diffusion models, not {info.arch}")
    if model.patches:
        raise ModelLoadError(path, "saving an SVD model with LoRAs or merges applied is not supported yet")
    sd = load_state_dict(path, model.digests[0] if model.digests else None)
    out = {LDM_UNET_PREFIX + k: v for k, v in strip_prefix(sd, info.prefix).items()}
    if clip_vision is not None:
        out.update({SVD_CLIP_VISION_PREFIX + k: v for k, v in clip_vision_state(clip_vision).items()})
    if vae is not None:
        out.update({vae_mod.LDM_VAE_PREFIX + k: v for k, v in vae_state(vae).items()})
    sampling = sampling_config(model)
    if sampling.get("kind") in _EDM_KINDS and sampling.get("prediction") in _V_PREDICTIONS:
        # the ends of the sampling's float32 sigma table (exp of a log-spaced linspace), as ComfyUI reads them
        ms = model_sampling_from_config(sampling)
        out["edm_vpred.sigma_max"] = ms.sigma_max.detach().clone().float().reshape(())
        out["edm_vpred.sigma_min"] = ms.sigma_min.detach().clone().float().reshape(())
    return out
