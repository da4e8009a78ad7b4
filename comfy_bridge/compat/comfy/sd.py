"""`comfy.sd`: loading models by path as MODEL / CLIP / VAE proxies (refs to the weights; executors
load them), and the CLIP / VAE classes packs check with isinstance."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from comfy_bridge.compat.comfy import model_detection  # noqa: F401  (packs import it from comfy.sd)
from comfy_bridge.packs.origin import UnsupportedFeature
from comfy_bridge.packs.proxies import CLIP, VAE, ModelPatcher, wrap


def load_checkpoint_guess_config(ckpt_path: str, output_vae: bool = True, output_clip: bool = True,
                                 output_clipvision: bool = False, embedding_directory: Any = None,
                                 output_model: bool = True, **kwargs: Any) -> tuple:
    """(MODEL, CLIP, VAE, None) of a checkpoint file, like CheckpointLoaderSimple with a path."""
    from nodes.loaders import make_ref, probe_arch
    path = Path(ckpt_path)
    arch, parts = probe_arch(path)
    model = wrap(make_ref("diffusion_model", arch, [path])) if output_model else None
    clip = wrap(make_ref("text_encoder", arch, [path])) if output_clip else None
    vae = wrap(make_ref("vae", arch, [path])) if output_vae else None
    return model, clip, vae, None


def load_diffusion_model(unet_path: str, model_options: dict | None = None) -> ModelPatcher:
    from nodes.loaders import make_ref, probe_arch
    arch, _ = probe_arch(Path(unet_path))
    return wrap(make_ref("diffusion_model", arch, [Path(unet_path)]))


def load_unet(unet_path: str, dtype: Any = None) -> ModelPatcher:
    """ComfyUI's older name for load_diffusion_model (dtype is the executors' choice here)."""
    return load_diffusion_model(unet_path)


def load_diffusion_model_state_dict(sd: dict, model_options: dict | None = None) -> ModelPatcher:
    raise UnsupportedFeature("comfy.sd.load_diffusion_model_state_dict",
                             "diffusion models are loaded from files on the executors, not from an in-process "
                             "state dict: use comfy.sd.load_diffusion_model with a path, or nodes.UNETLoader")


def load_lora_for_models(model: Any, clip: Any, lora: Any, strength_model: float, strength_clip: float) -> tuple:
    raise UnsupportedFeature("comfy.sd.load_lora_for_models with a state dict",
                             "LoRAs are applied from files: use nodes.LoraLoader")


def load_clip(*args: Any, **kwargs: Any) -> CLIP:
    raise UnsupportedFeature("comfy.sd.load_clip", "use nodes.CLIPLoader")


__all__ = ["CLIP", "VAE", "ModelPatcher", "load_checkpoint_guess_config", "load_diffusion_model",
           "load_unet", "load_diffusion_model_state_dict", "load_lora_for_models", "load_clip", "model_detection"]
