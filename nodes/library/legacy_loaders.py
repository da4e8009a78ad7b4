"""Two loaders ComfyUI keeps in nodes.py as deprecated: CheckpointLoader (a checkpoint with an ldm YAML
config) and DiffusersLoader (a diffusers pipeline folder).

CheckpointLoader: like ComfyUI, the architecture comes from the checkpoint's tensors; the config only
changes what ComfyUI lets it change: `parameterization: "v"` samples the model as v-prediction and the text
encoder's `layer_idx` is a CLIP skip. A config file in models/configs is read; ComfyUI's own configs (which
it ships in models/configs) are known by name with those two facts, so workflows naming them run without
the files.

DiffusersLoader: the UNet, text encoder(s) and VAE of an SD1/SD2/SDXL pipeline folder under
models/diffusers; the weights are read on the executors (nodes.models.loader)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from cluster.refs import ModelRef
from nodes.loaders import CheckpointLoaderSimple, make_ref, model_file, probe_arch
from nodes.workspace import active

# ComfyUI 0.3.64's models/configs: name -> (v-prediction, the text encoder's layer_idx).
COMFYUI_CONFIGS: dict[str, tuple[bool, int | None]] = {
    "anything_v3.yaml": (False, -2),
    "v1-inference.yaml": (False, None),
    "v1-inference_clip_skip_2.yaml": (False, -2),
    "v1-inference_clip_skip_2_fp16.yaml": (False, -2),
    "v1-inference_fp16.yaml": (False, None),
    "v1-inpainting-inference.yaml": (False, None),
    "v2-inference-v.yaml": (True, None),
    "v2-inference-v_fp32.yaml": (True, None),
    "v2-inference.yaml": (False, None),
    "v2-inference_fp32.yaml": (False, None),
    "v2-inpainting-inference.yaml": (False, None),
}


def config_effects(config_name: str) -> tuple[bool, int | None]:
    """(v-prediction, CLIP layer_idx) of a config: the workspace's file when there is one, else ComfyUI's."""
    path = active().full_path("configs", config_name)
    if path is None:
        if config_name in COMFYUI_CONFIGS:
            return COMFYUI_CONFIGS[config_name]
        raise ValueError(f"config_name: {config_name!r} is not a file in the configs folder")
    try:
        params = yaml.safe_load(path.read_text())["model"]["params"]
        layer = (params.get("cond_stage_config") or {}).get("params", {}).get("layer_idx")
    except (yaml.YAMLError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"config_name: {config_name!r} is not an ldm model config ({type(e).__name__}: {e})") from e
    return params.get("parameterization") == "v", layer


def _v_prediction(model: ModelRef, path: Path) -> ModelRef:
    """ComfyUI's ModelSamplingDiscrete + V_PREDICTION on the model's own schedule (zero terminal SNR only
    where the checkpoint asks for it: SDXL with `v_pred` and `ztsnr` markers)."""
    from nodes.library.model_advanced import ModelSamplingDiscrete
    from nodes.models.safetensors_io import shapes_of

    zsnr = model.arch == "sdxl" and {"v_pred", "ztsnr"} <= set(shapes_of(path)[0])
    return ModelSamplingDiscrete().patch(model, "v_prediction", zsnr)[0]


class CheckpointLoader:
    @classmethod
    def INPUT_TYPES(cls):
        configs = sorted(set(active().list_files("configs")) | set(COMFYUI_CONFIGS))
        return {
            "required": {
                "config_name": (
                    configs,
                    {"tooltip": "The ldm YAML config: only its v-prediction and CLIP skip settings are used."},
                ),
                "ckpt_name": (active().list_files("checkpoints"), {"tooltip": "The checkpoint file to load."}),
            }
        }

    MODEL_FILE_INPUTS = {"ckpt_name": ("checkpoints", "diffusion_model")}  # checked at validation
    RETURN_TYPES = ("MODEL", "CLIP", "VAE")
    FUNCTION = "load_checkpoint"
    CATEGORY = "advanced/loaders"
    DEPRECATED = True
    DESCRIPTION = (
        "Loads a checkpoint as Load Checkpoint does, then applies its YAML config's v-prediction "
        "and CLIP skip settings."
    )

    def load_checkpoint(self, config_name: str, ckpt_name: str) -> tuple[Any, Any, Any]:
        v_pred, layer = config_effects(config_name)
        model, clip, vae = CheckpointLoaderSimple().load_checkpoint(ckpt_name)
        if v_pred and model is not None:
            model = _v_prediction(model, model_file("checkpoints", ckpt_name, "ckpt_name"))
        if layer is not None and clip is not None:
            clip = clip.with_option("layer", int(layer))
        return model, clip, vae


def diffusers_folders() -> list[str]:
    """Every folder under models/diffusers holding a model_index.json, relative, as ComfyUI lists them."""
    found = []
    for base in active().folder_paths("diffusers"):
        if base.is_dir():
            for root, _, files in os.walk(base, followlinks=True):
                if "model_index.json" in files:
                    found.append(os.path.relpath(root, start=base))
    return found


class DiffusersLoader:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model_path": (diffusers_folders(), {"tooltip": "A diffusers pipeline folder."})}}

    RETURN_TYPES = ("MODEL", "CLIP", "VAE")
    FUNCTION = "load_checkpoint"
    CATEGORY = "advanced/loaders/deprecated"
    DESCRIPTION = "Loads the diffusion model, text encoder and VAE of a diffusers pipeline folder (SD1, SD2, SDXL)."

    def load_checkpoint(
        self, model_path: str, output_vae: bool = True, output_clip: bool = True
    ) -> tuple[Any, Any, Any]:
        path = model_file("diffusers", model_path, "model_path")
        arch, parts = probe_arch(path, "model_path")
        missing = {"diffusion_model", "text_encoder", "vae"} - parts
        if missing:
            raise ValueError(f"model_path: the diffusers folder {model_path!r} has no {', '.join(sorted(missing))}")
        return (
            make_ref("diffusion_model", arch, [path]),
            make_ref("text_encoder", arch, [path]) if output_clip else None,
            make_ref("vae", arch, [path]) if output_vae else None,
        )


NODE_CLASS_MAPPINGS = {"CheckpointLoader": CheckpointLoader, "DiffusersLoader": DiffusersLoader}
NODE_DISPLAY_NAME_MAPPINGS = {"CheckpointLoader": "Load Checkpoint With Config (DEPRECATED)"}
