"""`comfy.sd`: loading models by path as MODEL / CLIP / VAE proxies (refs to the weights; executors
load them), and the CLIP / VAE classes packs check with isinstance."""

from __future__ import annotations

import logging
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from comfy_bridge.compat.comfy import model_detection  # noqa: F401  (packs import it from comfy.sd)
from comfy_bridge.packs.origin import UnsupportedFeature
from comfy_bridge.packs.proxies import CLIP, VAE, ModelPatcher, wrap

log = logging.getLogger(__name__)


def load_checkpoint_guess_config(
    ckpt_path: str,
    output_vae: bool = True,
    output_clip: bool = True,
    output_clipvision: bool = False,
    embedding_directory: Any = None,
    output_model: bool = True,
    **kwargs: Any,
) -> tuple:
    """(MODEL, CLIP, VAE, None) of a checkpoint file, like CheckpointLoaderSimple with a path."""
    from nodes.loaders import make_ref, probe_arch

    path = Path(ckpt_path)
    arch, parts = probe_arch(path)
    model = wrap(make_ref("diffusion_model", arch, [path])) if output_model else None
    clip = wrap(make_ref("text_encoder", arch, [path])) if output_clip else None
    vae = wrap(make_ref("vae", arch, [path])) if output_vae else None
    return model, clip, vae, None


class CLIPType(Enum):
    """The text encoder families ComfyUI's loaders take (`clip_type=`), with ComfyUI's numbers."""

    STABLE_DIFFUSION = 1
    STABLE_CASCADE = 2
    SD3 = 3
    STABLE_AUDIO = 4
    HUNYUAN_DIT = 5
    FLUX = 6
    MOCHI = 7
    LTXV = 8
    HUNYUAN_VIDEO = 9
    PIXART = 10
    COSMOS = 11
    LUMINA2 = 12
    WAN = 13
    HIDREAM = 14
    CHROMA = 15
    ACE = 16
    OMNIGEN2 = 17
    QWEN_IMAGE = 18
    HUNYUAN_IMAGE = 19
    HUNYUAN_VIDEO_15 = 20
    OVIS = 21
    KANDINSKY5 = 22
    KANDINSKY5_IMAGE = 23
    NEWBIE = 24
    FLUX2 = 25


def load_checkpoint(
    config_path: str | None = None,
    ckpt_path: str | None = None,
    output_vae: bool = True,
    output_clip: bool = True,
    embedding_directory: Any = None,
    state_dict: dict | None = None,
    config: dict | None = None,
) -> tuple:
    """ComfyUI's deprecated loader with an LDM model config (YAML): (MODEL, CLIP, VAE) of `ckpt_path`.

    As in ComfyUI the weights come from `ckpt_path` (state_dict is not read) and the architecture from the
    weights; of the config, `model.params.parameterization: v` makes the MODEL v-prediction and
    `cond_stage_config.params.layer_idx` sets the CLIP's last layer.
    """
    from nodes.library.model_advanced import ModelSamplingDiscrete

    if ckpt_path is None:
        raise ValueError(
            "comfy.sd.load_checkpoint: ckpt_path is required (the weights are read from it; "
            "state_dict is not used, as in ComfyUI)"
        )
    if config is None:
        if config_path is None:
            raise ValueError("comfy.sd.load_checkpoint: pass config_path (a model config YAML) or config")
        config = yaml.safe_load(Path(config_path).read_text())
    model, clip, vae, _ = load_checkpoint_guess_config(
        ckpt_path, output_vae=output_vae, output_clip=output_clip, embedding_directory=embedding_directory
    )
    params = config["model"]["params"]
    if params.get("parameterization") == "v":
        model = ModelSamplingDiscrete().patch(model, "v_prediction", False)[0]
    layer_idx = (params.get("cond_stage_config") or {}).get("params", {}).get("layer_idx")
    if layer_idx is not None and clip is not None:
        clip = clip.with_option("layer", layer_idx)
    return model, clip, vae


def load_diffusion_model(unet_path: str, model_options: dict | None = None) -> ModelPatcher:
    from nodes.loaders import make_ref, probe_arch

    arch, _ = probe_arch(Path(unet_path))
    return wrap(make_ref("diffusion_model", arch, [Path(unet_path)]))


def load_unet(unet_path: str, dtype: Any = None) -> ModelPatcher:
    """ComfyUI's older name for load_diffusion_model (dtype is the executors' choice here)."""
    return load_diffusion_model(unet_path)


def load_diffusion_model_state_dict(
    sd: dict, model_options: dict | None = None, metadata: dict | None = None, **kwargs: Any
) -> ModelPatcher | None:
    """A MODEL of a diffusion model state dict (the "model.diffusion_model." prefix of a checkpoint taken off, as
    ComfyUI does), or None when its architecture is not one this backend detects (ComfyUI: no model config
    matches). The dict becomes a file the executors load (comfy.state_dict_files); model_options' dtypes
    are the executors' choice, as with load_diffusion_model."""
    from comfy_bridge.compat.comfy.state_dict_files import state_dict_file
    from comfy_bridge.compat.comfy.utils import state_dict_prefix_replace
    from nodes.models.errors import ModelLoadError

    if (model_options or {}).get("custom_operations") is not None:
        raise UnsupportedFeature(
            "comfy.sd.load_diffusion_model_state_dict with custom_operations",
            "a pack's own layer operations (GGUF's quantized ops) build ComfyUI's in-process "
            "model; this backend's executors build their own",
        )
    prefix = model_detection.unet_prefix_from_state_dict(sd)
    unet = state_dict_prefix_replace(sd, {prefix: ""}, filter_keys=True)
    path = state_dict_file(unet or sd, "comfy.sd.load_diffusion_model_state_dict")
    try:
        return load_diffusion_model(str(path))
    except ModelLoadError as e:
        log.warning("comfy.sd.load_diffusion_model_state_dict: %s", e)
        return None


def load_unet_state_dict(sd: dict, dtype: Any = None) -> ModelPatcher:
    """ComfyUI's older name for load_diffusion_model_state_dict."""
    return load_diffusion_model_state_dict(sd)


def load_text_encoder_state_dicts(
    state_dicts: list | None = None,
    embedding_directory: Any = None,
    clip_type: CLIPType = CLIPType.STABLE_DIFFUSION,
    model_options: dict | None = None,
) -> CLIP:
    """A CLIP of text encoder state dicts, as load_clip builds one of files of `clip_type` (each dict becomes a
    file the executors load: comfy.state_dict_files)."""
    from comfy_bridge.compat.comfy.state_dict_files import state_dict_file

    if (model_options or {}).get("custom_operations") is not None:
        raise UnsupportedFeature(
            "comfy.sd.load_text_encoder_state_dicts with custom_operations",
            "a pack's own layer operations (GGUF's quantized ops) build ComfyUI's in-process "
            "model; this backend's executors build their own",
        )
    paths = [str(state_dict_file(sd, "comfy.sd.load_text_encoder_state_dicts")) for sd in state_dicts or []]
    return load_clip(paths, embedding_directory, clip_type, model_options)


def load_lora_for_models(model: Any, clip: Any, lora: Any, strength_model: float, strength_clip: float) -> tuple:
    raise UnsupportedFeature(
        "comfy.sd.load_lora_for_models with a state dict", "LoRAs are applied from files: use nodes.LoraLoader"
    )


def load_clip(
    ckpt_paths: list[str],
    embedding_directory: Any = None,
    clip_type: CLIPType | str = CLIPType.STABLE_DIFFUSION,
    model_options: dict | None = None,
) -> CLIP:
    """A CLIP of text encoder files, as ComfyUI's CLIPLoader / DualCLIPLoader / TripleCLIPLoader build it: one
    file of `clip_type`'s family; two are that dual type's pair (two STABLE_DIFFUSION files are SDXL's
    CLIP-L + CLIP-G, as ComfyUI detects them); three are SD3's."""
    from nodes.loaders import _clip_arch, _single_clip_arch, make_ref

    kind = clip_type.name.lower() if isinstance(clip_type, CLIPType) else str(clip_type).lower()
    paths = [Path(p) for p in ckpt_paths]
    if len(paths) == 1:
        return wrap(make_ref("text_encoder", _single_clip_arch(paths[0], kind), paths, clip_type=kind))
    if len(paths) == 2:
        kind = "sdxl" if kind == "stable_diffusion" else kind
        return wrap(make_ref("text_encoder", _clip_arch(kind), paths, clip_type=kind))
    if len(paths) == 3:
        return wrap(make_ref("text_encoder", "sd3", paths, clip_type="sd3"))
    raise ValueError(f"comfy.sd.load_clip: {len(paths)} text encoder files; one, two or three are supported")


class StyleModel:
    """ComfyUI's STYLE_MODEL: a module that maps CLIP vision tokens to extra conditioning tokens. Packs
    annotate with it and call get_cond on a CLIP vision output; the module itself is this backend's
    (nodes.models.style_model builds the T2I style adapter and Flux Redux)."""

    def __init__(self, model: Any, device: Any = "cpu") -> None:
        self.model = model

    def get_cond(self, input: Any) -> Any:
        """The style tokens for a CLIP vision output (its last_hidden_state)."""
        return self.model(input.last_hidden_state)


__all__ = [
    "CLIP",
    "VAE",
    "ModelPatcher",
    "CLIPType",
    "StyleModel",
    "load_checkpoint",
    "load_unet_state_dict",
    "load_text_encoder_state_dicts",
    "load_checkpoint_guess_config",
    "load_diffusion_model",
    "load_unet",
    "load_diffusion_model_state_dict",
    "load_lora_for_models",
    "load_clip",
    "model_detection",
]
