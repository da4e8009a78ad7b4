"""ComfyUI's comfy_extras.nodes_model_merging: merging MODEL/CLIP refs, and saving weights to files.

A merge stays a ModelRef (model1's ref plus a merge step naming model2's ref, see nodes/models/merge.py);
the executor that loads it combines the weights, and its weight cache keys the merge by that ref.

The save nodes run in-process on the head: it has the model files (the loader nodes digest them there)
and the output folder, and a save is file-to-file arithmetic that needs no accelerator. Doing it on an
executor would mean shipping the whole model back over the data plane, or an output folder shared with
every executor."""

from __future__ import annotations

import json
import os
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes import image_io, output_claims
from nodes.image_io import save_image_path
from nodes.models.merge import with_merge
from nodes.output_claims import write_atomic
from nodes.workspace import active

MODULE = "comfy_extras.nodes_model_merging"
CATEGORY = "advanced/model_merging"
RATIO = (
    "FLOAT",
    {
        "default": 1.0,
        "min": 0.0,
        "max": 1.0,
        "step": 0.01,
        "tooltip": "How much of model1 to keep (1.0 = model1 only, 0.0 = model2 only).",
    },
)
MULTIPLIER = (
    "FLOAT",
    {
        "default": 1.0,
        "min": -10.0,
        "max": 10.0,
        "step": 0.01,
        "tooltip": "Scale of the difference (model1 - model2) * multiplier.",
    },
)
HIDDEN = {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"}


def _ratio_rule(prefix: str, ratio: float) -> tuple[str, float, float]:
    """ComfyUI's ratio merge: w = w1 * ratio + (1 - ratio) * w2."""
    return (prefix, float(ratio), 1.0 - float(ratio))


def _difference_rule(multiplier: float) -> tuple[str, float, float]:
    """w = (w1 - w2) * multiplier, on every key."""
    return ("", float(multiplier), -float(multiplier))


SUM_RULE = ("", 1.0, 1.0)  # w = w1 + w2


class ModelMergeSimple:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model1": ("MODEL",), "model2": ("MODEL",), "ratio": RATIO}}

    RETURN_TYPES = ("MODEL",)
    FUNCTION = "merge"
    CATEGORY = CATEGORY
    DESCRIPTION = "Blends two diffusion models of the same architecture: model1 * ratio + model2 * (1 - ratio)."

    def merge(self, model1: ModelRef, model2: ModelRef, ratio: float) -> tuple[ModelRef]:
        return (with_merge(model1, model2, (_ratio_rule("", ratio),)),)


class ModelMergeSubtract:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model1": ("MODEL",), "model2": ("MODEL",), "multiplier": MULTIPLIER}}

    RETURN_TYPES = ("MODEL",)
    FUNCTION = "merge"
    CATEGORY = CATEGORY
    DESCRIPTION = "The difference of two diffusion models, scaled: (model1 - model2) * multiplier."

    def merge(self, model1: ModelRef, model2: ModelRef, multiplier: float) -> tuple[ModelRef]:
        return (with_merge(model1, model2, (_difference_rule(multiplier),)),)


class ModelMergeAdd:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model1": ("MODEL",), "model2": ("MODEL",)}}

    RETURN_TYPES = ("MODEL",)
    FUNCTION = "merge"
    CATEGORY = CATEGORY
    DESCRIPTION = "The sum of two diffusion models' weights (e.g. a base plus a difference from ModelMergeSubtract)."

    def merge(self, model1: ModelRef, model2: ModelRef) -> tuple[ModelRef]:
        return (with_merge(model1, model2, (SUM_RULE,)),)


class ModelMergeBlocks:
    """Ratio per key prefix of the diffusion model (ldm names: "input_blocks.3.", "out."): the longest
    matching prefix decides; keys matching none take the first ratio, as in ComfyUI."""

    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def block_inputs(cls) -> dict[str, tuple]:
        return {"input": RATIO, "middle": RATIO, "out": RATIO}

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model1": ("MODEL",), "model2": ("MODEL",), **cls.block_inputs()}}

    RETURN_TYPES = ("MODEL",)
    FUNCTION = "merge"
    CATEGORY = CATEGORY
    DESCRIPTION = "Blends two diffusion models with a separate ratio for each block (1.0 = model1's block)."

    def merge(self, model1: ModelRef, model2: ModelRef, **ratios: float) -> tuple[ModelRef]:
        order = list(self.block_inputs())
        unknown = sorted(set(ratios) - set(order))
        if unknown:
            raise ValueError(f"{type(self).__name__}: unknown block inputs {unknown}")
        values = {name: ratios.get(name, 1.0) for name in order}
        rules = (_ratio_rule("", values[order[0]]),) + tuple(_ratio_rule(p, r) for p, r in values.items())
        return (with_merge(model1, model2, rules),)


class CLIPMergeSimple:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"clip1": ("CLIP",), "clip2": ("CLIP",), "ratio": RATIO}}

    RETURN_TYPES = ("CLIP",)
    FUNCTION = "merge"
    CATEGORY = CATEGORY
    DESCRIPTION = "Blends two text encoders of the same kind: clip1 * ratio + clip2 * (1 - ratio)."

    def merge(self, clip1: ModelRef, clip2: ModelRef, ratio: float) -> tuple[ModelRef]:
        return (with_merge(clip1, clip2, (_ratio_rule("", ratio),)),)


class CLIPMergeSubtract:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"clip1": ("CLIP",), "clip2": ("CLIP",), "multiplier": MULTIPLIER}}

    RETURN_TYPES = ("CLIP",)
    FUNCTION = "merge"
    CATEGORY = CATEGORY
    DESCRIPTION = "The difference of two text encoders, scaled: (clip1 - clip2) * multiplier."

    def merge(self, clip1: ModelRef, clip2: ModelRef, multiplier: float) -> tuple[ModelRef]:
        return (with_merge(clip1, clip2, (_difference_rule(multiplier),)),)


class CLIPMergeAdd:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"clip1": ("CLIP",), "clip2": ("CLIP",)}}

    RETURN_TYPES = ("CLIP",)
    FUNCTION = "merge"
    CATEGORY = CATEGORY
    DESCRIPTION = "The sum of two text encoders' weights."

    def merge(self, clip1: ModelRef, clip2: ModelRef) -> tuple[ModelRef]:
        return (with_merge(clip1, clip2, (SUM_RULE,)),)


# ---- saving ----------------------------------------------------------------------------------------------


def _metadata(prompt: Any, extra_pnginfo: dict | None) -> dict[str, str]:
    """The prompt and workflow, unless the server runs with --disable-metadata (image_io keeps that flag)."""
    if not image_io.metadata_enabled():
        return {}
    meta = {"prompt": json.dumps(prompt) if prompt is not None else ""}
    meta.update({k: json.dumps(v) for k, v in (extra_pnginfo or {}).items()})
    return meta


def _write(filename_prefix: str, sd: dict[str, torch.Tensor], metadata: dict[str, str], title: bool = False) -> str:
    """Write `sd` to <output>/<prefix>_<counter:05>_.safetensors (ComfyUI's naming); returns the path."""
    from safetensors.torch import save_file

    folder, stem, counter, _, _ = save_image_path(filename_prefix, active().output_dir)
    taken = output_claims.claim(folder, stem, counter)  # a re-run after a head kill reuses its name
    path = os.path.join(taken.folder, f"{taken.stem}_{taken.counter:05}_.safetensors")
    if title and "modelspec.sai_model_spec" in metadata:
        metadata = {**metadata, "modelspec.title": f"{taken.stem} {taken.counter}"}
    tensors = {k: v.contiguous() for k, v in sd.items()}
    write_atomic(path, lambda tmp: save_file(tensors, tmp, metadata=metadata or None))
    return path


def _model_metadata(arch: str, extra: dict[str, torch.Tensor]) -> dict[str, str]:
    """ComfyUI's modelspec entries: the architecture for SDXL, the prediction type always."""
    meta = {}
    if arch == "sdxl":
        meta = {
            "modelspec.architecture": "stable-diffusion-xl-v1-base",
            "modelspec.sai_model_spec": "1.0.0",
            "modelspec.implementation": "sgm",
        }
    meta["modelspec.predict_key"] = "v" if "v_pred" in extra else "epsilon"
    return meta


def save_checkpoint(
    filename_prefix: str,
    model: ModelRef,
    clip: ModelRef | None,
    vae: ModelRef | None,
    prompt: Any = None,
    extra_pnginfo: dict | None = None,
) -> str:
    """One ldm-layout checkpoint file of the model (and the CLIP and VAE when given); returns its path."""
    from nodes.models.checkpoint_save import diffusion_model_state, text_encoder_checkpoint_state, vae_state
    from nodes.models.vae import LDM_VAE_PREFIX

    arch, sd, extra = diffusion_model_state(model)
    if clip is not None:
        sd.update(text_encoder_checkpoint_state(clip, arch))
    if vae is not None:
        sd.update({LDM_VAE_PREFIX + k: v for k, v in vae_state(vae).items()})
    sd.update(extra)
    return _write(filename_prefix, sd, {**_model_metadata(arch, extra), **_metadata(prompt, extra_pnginfo)}, title=True)


# supported_models.SVD_img2vid's architecture name in the modelspec entries ComfyUI writes for an SVD checkpoint
SVD_MODELSPEC = {
    "modelspec.architecture": "stable-video-diffusion-img2vid-v1",
    "modelspec.sai_model_spec": "1.0.0",
    "modelspec.implementation": "sgm",
}


def save_image_only_checkpoint(
    filename_prefix: str,
    model: ModelRef,
    clip_vision: ModelRef | None,
    vae: ModelRef | None,
    prompt: Any = None,
    extra_pnginfo: dict | None = None,
) -> str:
    """One SVD checkpoint (VideoUNet, CLIP image encoder, temporal VAE) as ComfyUI's ImageOnlyCheckpointSave writes
    it; returns its path."""
    from nodes.models.checkpoint_save import svd_checkpoint_state

    sd = svd_checkpoint_state(model, clip_vision, vae)
    return _write(filename_prefix, sd, {**SVD_MODELSPEC, **_metadata(prompt, extra_pnginfo)}, title=True)


class CheckpointSave:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "clip": ("CLIP",),
                "vae": ("VAE",),
                "filename_prefix": (
                    "STRING",
                    {"default": "checkpoints/ComfyUI", "tooltip": "Output subfolder and file name start."},
                ),
            },
            "hidden": HIDDEN,
        }

    RETURN_TYPES = ()
    FUNCTION = "save"
    OUTPUT_NODE = True
    CATEGORY = CATEGORY
    DESCRIPTION = (
        "Writes the model, text encoder and VAE (merges and LoRAs applied) as one .safetensors "
        "checkpoint in the output folder; SD1, SD2 and SDXL models."
    )

    def save(
        self,
        model: ModelRef,
        clip: ModelRef,
        vae: ModelRef,
        filename_prefix: str,
        prompt: Any = None,
        extra_pnginfo: dict | None = None,
    ) -> dict:
        save_checkpoint(filename_prefix, model, clip, vae, prompt, extra_pnginfo)
        return {}


class ModelSave:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "filename_prefix": (
                    "STRING",
                    {"default": "diffusion_models/ComfyUI", "tooltip": "Output subfolder and file name start."},
                ),
            },
            "hidden": HIDDEN,
        }

    RETURN_TYPES = ()
    FUNCTION = "save"
    OUTPUT_NODE = True
    CATEGORY = CATEGORY
    DESCRIPTION = "Writes the diffusion model alone (merges and LoRAs applied) as a .safetensors file."

    def save(
        self, model: ModelRef, filename_prefix: str, prompt: Any = None, extra_pnginfo: dict | None = None
    ) -> dict:
        save_checkpoint(filename_prefix, model, None, None, prompt, extra_pnginfo)
        return {}


class CLIPSave:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "clip": ("CLIP",),
                "filename_prefix": (
                    "STRING",
                    {"default": "clip/ComfyUI", "tooltip": "Output subfolder and file name start."},
                ),
            },
            "hidden": HIDDEN,
        }

    RETURN_TYPES = ()
    FUNCTION = "save"
    OUTPUT_NODE = True
    CATEGORY = CATEGORY
    DESCRIPTION = (
        "Writes each text encoder of the CLIP as its own .safetensors file (<prefix>_clip_l, "
        "_clip_g, _clip_h) in HF layout, merges and LoRAs applied."
    )

    def save(self, clip: ModelRef, filename_prefix: str, prompt: Any = None, extra_pnginfo: dict | None = None) -> dict:
        from nodes.models.checkpoint_save import text_encoder_sides

        _, sides = text_encoder_sides(clip)
        meta = {"format": "pt", **_metadata(prompt, extra_pnginfo)} if image_io.metadata_enabled() else {}
        for side in ("l", "g", "h"):  # ComfyUI's order of tower prefixes
            if side in sides:
                _write(f"{filename_prefix}_clip_{side}", sides[side], meta)
        return {}


class VAESave:
    RELATIVE_PYTHON_MODULE = MODULE

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "vae": ("VAE",),
                "filename_prefix": (
                    "STRING",
                    {"default": "vae/ComfyUI_vae", "tooltip": "Output subfolder and file name start."},
                ),
            },
            "hidden": HIDDEN,
        }

    RETURN_TYPES = ()
    FUNCTION = "save"
    OUTPUT_NODE = True
    CATEGORY = CATEGORY
    DESCRIPTION = "Writes the VAE as a .safetensors file in ldm layout."

    def save(self, vae: ModelRef, filename_prefix: str, prompt: Any = None, extra_pnginfo: dict | None = None) -> dict:
        from nodes.models.checkpoint_save import vae_state

        _write(filename_prefix, vae_state(vae), _metadata(prompt, extra_pnginfo))
        return {}


NODE_CLASS_MAPPINGS = {
    "ModelMergeSimple": ModelMergeSimple,
    "ModelMergeBlocks": ModelMergeBlocks,
    "ModelMergeSubtract": ModelMergeSubtract,
    "ModelMergeAdd": ModelMergeAdd,
    "CheckpointSave": CheckpointSave,
    "CLIPMergeSimple": CLIPMergeSimple,
    "CLIPMergeSubtract": CLIPMergeSubtract,
    "CLIPMergeAdd": CLIPMergeAdd,
    "CLIPSave": CLIPSave,
    "VAESave": VAESave,
    "ModelSave": ModelSave,
}
NODE_DISPLAY_NAME_MAPPINGS = {"CheckpointSave": "Save Checkpoint"}
