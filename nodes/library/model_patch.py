"""ComfyUI's model-patch nodes (comfy_extras/nodes_model_patch.py): ModelPatchLoader, which reads a file of the
model_patches folder as a MODEL_PATCH (a ModelRef of component "model_patch", its kind told by its keys:
nodes.models.model_patch), and QwenImageDiffsynthControlnet, which attaches a DiffSynth ControlNet with its
control image to a Qwen-Image MODEL, or a Z-Image Fun ControlNet Union (first release) to a Z-Image MODEL
(nodes.diffsynth; the patch acts inside the denoise steps); and USOStyleReference, which puts USO's style tokens
for a reference image before a FLUX.1 model's text tokens (nodes.uso); and AnimaLLLiteApply, which attaches an
Anima LLLite with its control image (and mask) to an Anima MODEL (nodes.models.anima_lllite). The Fun ControlNet's 2.x layouts and the
kinds ComfyUI added later load no further than their kind: the loader names them unsupported."""

from __future__ import annotations

import torch

from cluster.refs import ModelRef
from nodes.diffsynth import DiffSynthPatch, LLLitePatch, with_patch
from nodes.inputs import require_component, require_model, require_ref
from nodes.library.clip_vision import ClipVisionOutput
from nodes.loaders import make_ref, model_file
from nodes.models.model_patch import ANIMA_LLLITE, USO_PROJECTOR, WAN_MULTITALK, ZIMAGE_FUN_CONTROL
from nodes.uso import UsoStylePatch, encoded_states, with_uso
from nodes.workspace import active

COMPONENT = "model_patch"
MODULE = "comfy_extras.nodes_model_patch"


class ModelPatchLoader:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"name": (active().list_files("model_patches"), {"tooltip": "The model patch file."})}}

    RETURN_TYPES = ("MODEL_PATCH",)
    FUNCTION = "load_model_patch"
    CATEGORY = "advanced/loaders"
    RELATIVE_PYTHON_MODULE = MODULE
    EXPERIMENTAL = True
    DESCRIPTION = (
        "Loads a model patch (a DiffSynth or Z-Image Fun ControlNet, USO's style projector, an Anima LLLite, "
        "InfiniteTalk's audio patch) from "
        "models/model_patches."
    )

    def load_model_patch(self, name: str) -> tuple[ModelRef]:
        from nodes.models.errors import ModelLoadError
        from nodes.models.model_patch import (
            KIND_NAMES,
            QWEN_DIFFSYNTH,
            USO_PROJECTOR,
            ZIMAGE_FUN_CONTROL,
            extra_channels,
            patch_kind,
        )
        from nodes.models.safetensors_io import shapes_of
        from nodes.models.uso_projector import refuse_reason as uso_refuse_reason
        from nodes.models.zimage_fun_control import refuse_reason

        path = model_file("model_patches", name, "name")
        try:
            shapes, metadata = shapes_of(path)
        except ModelLoadError as e:
            raise ValueError(f"name: {e}") from e
        kind = patch_kind(shapes)
        if kind is None:
            raise ValueError(f"name: {name!r} is no model patch ComfyUI knows (none of the keys its loader tests)")
        if kind == ZIMAGE_FUN_CONTROL:
            reason = refuse_reason(shapes)
            if reason is not None:
                raise ValueError(f"name: {name!r} {reason}")
            return (make_ref(COMPONENT, kind, [path]),)
        if kind == ANIMA_LLLITE:
            from nodes.models.anima_lllite import config_of

            try:
                config = config_of(shapes, metadata)
            except (KeyError, ValueError) as e:
                raise ValueError(f"name: {name!r} {e}") from None
            sizes = {"in_channels": config["in_channels"], "masked_input": config["masked_input"]}
            return (make_ref(COMPONENT, kind, [path], **sizes),)
        if kind == WAN_MULTITALK:
            from nodes.models.wan_multitalk import sizes_of

            try:
                sizes_of(shapes)
            except (KeyError, ValueError) as e:
                raise ValueError(f"name: {name!r} {e}") from None
            return (make_ref(COMPONENT, kind, [path]),)
        if kind == USO_PROJECTOR:
            reason = uso_refuse_reason(shapes)
            if reason is not None:
                raise ValueError(f"name: {name!r} {reason}")
            return (make_ref(COMPONENT, kind, [path]),)
        if kind != QWEN_DIFFSYNTH:
            raise ValueError(f"name: {name!r} is {KIND_NAMES[kind]}, which is not supported yet")
        try:
            extra = extra_channels(shapes)
        except ValueError as e:
            raise ValueError(f"name: {name!r}: {e}") from e
        return (make_ref(COMPONENT, kind, [path], extra_channels=extra),)


class QwenImageDiffsynthControlnet:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "model_patch": ("MODEL_PATCH",),
                "vae": ("VAE",),
                "image": ("IMAGE",),
                "strength": ("FLOAT", {"default": 1.0, "min": -10.0, "max": 10.0, "step": 0.01}),
            },
            "optional": {"mask": ("MASK",)},
        }

    RETURN_TYPES = ("MODEL",)
    FUNCTION = "diffsynth_controlnet"
    CATEGORY = "advanced/loaders/qwen"
    RELATIVE_PYTHON_MODULE = MODULE
    EXPERIMENTAL = True
    DESCRIPTION = "Steers a Qwen-Image model with a DiffSynth ControlNet and its control image."

    def diffsynth_controlnet(
        self,
        model: ModelRef,
        model_patch: ModelRef,
        vae: ModelRef,
        image: torch.Tensor,
        strength: float,
        mask: torch.Tensor | None = None,
    ) -> tuple[ModelRef]:
        model = require_model(model)
        patch = require_ref(model_patch, COMPONENT, "model_patch", "MODEL_PATCH")
        vae = require_component(vae, "vae", "vae")
        if patch.arch == USO_PROJECTOR:
            raise ValueError(
                "model_patch: USO's style projector is applied with USOStyleReference, not as a ControlNet"
            )
        if patch.arch == ANIMA_LLLITE:
            raise ValueError("model_patch: an Anima LLLite is applied with AnimaLLLiteApply")
        if patch.arch == WAN_MULTITALK:
            raise ValueError("model_patch: InfiniteTalk's audio patch is applied with WanInfiniteTalkToVideo")
        if patch.arch == ZIMAGE_FUN_CONTROL:
            if model.arch != "zimage":
                raise ValueError(f"model: a Z-Image Fun ControlNet patches Z-Image models, not {model.arch}")
            mask = None  # ComfyUI's ZImageControlPatch reads a mask only for the inpaint (2.x) layouts
        elif model.arch != "qwen_image":
            raise ValueError(f"model: a DiffSynth ControlNet patches Qwen-Image models, not {model.arch}")
        if not isinstance(image, torch.Tensor) or image.ndim != 4 or image.shape[-1] < 3:
            raise ValueError("image: expected an IMAGE [B,H,W,C] with at least 3 channels")
        if mask is not None:  # ComfyUI's: [B,1,H,W], inverted (the ControlNet fills where the mask was 0)
            if not isinstance(mask, torch.Tensor) or mask.ndim not in (2, 3):
                raise ValueError("mask: expected a MASK [B,H,W] or [H,W]")
            mask = 1.0 - mask.reshape(-1, 1, *mask.shape[-2:])
        return (with_patch(model, DiffSynthPatch.of(patch, vae, image[:, :, :, :3], strength, mask)),)


class USOStyleReference:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "model_patch": ("MODEL_PATCH",),
                "clip_vision_output": ("CLIP_VISION_OUTPUT",),
            }
        }

    RETURN_TYPES = ("MODEL",)
    FUNCTION = "apply_patch"
    CATEGORY = "advanced/model_patches/flux"
    RELATIVE_PYTHON_MODULE = MODULE
    EXPERIMENTAL = True
    DESCRIPTION = "Styles a FLUX.1 model after a reference image with USO's projector and the image's SigLIP states."

    def apply_patch(
        self, model: ModelRef, model_patch: ModelRef, clip_vision_output: ClipVisionOutput
    ) -> tuple[ModelRef]:
        model = require_model(model)
        patch = require_ref(model_patch, COMPONENT, "model_patch", "MODEL_PATCH")
        if patch.arch != USO_PROJECTOR:
            raise ValueError(f"model_patch: USOStyleReference takes USO's style projector, not a {patch.arch} patch")
        if model.arch not in ("flux", "flux-schnell"):
            raise ValueError(f"model: USO's style tokens patch FLUX.1 models, not {model.arch}")
        if not isinstance(clip_vision_output, ClipVisionOutput):
            raise ValueError("clip_vision_output: expected a CLIP_VISION_OUTPUT (CLIPVisionEncode)")
        states = encoded_states(clip_vision_output.all_hidden_states, clip_vision_output.penultimate_hidden_states)
        return (with_uso(model, UsoStylePatch.of(patch, states)),)


class AnimaLLLiteApply:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL",),
                "model_patch": ("MODEL_PATCH",),
                "image": ("IMAGE",),
                "strength": ("FLOAT", {"default": 1.0, "min": -10.0, "max": 10.0, "step": 0.01}),
                "start_percent": ("FLOAT", {"default": 0.0, "min": 0.0, "max": 1.0, "step": 0.001}),
                "end_percent": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.001}),
            },
            "optional": {"mask": ("MASK",)},
        }

    RETURN_TYPES = ("MODEL",)
    FUNCTION = "apply_patch"
    CATEGORY = "model/patch/anima"
    RELATIVE_PYTHON_MODULE = MODULE
    EXPERIMENTAL = True
    DESCRIPTION = "Steers an Anima model with an Anima LLLite and its control image (and inpainting mask)."

    def apply_patch(
        self,
        model: ModelRef,
        model_patch: ModelRef,
        image: torch.Tensor,
        strength: float,
        start_percent: float,
        end_percent: float,
        mask: torch.Tensor | None = None,
    ) -> tuple[ModelRef]:
        from nodes.modelfns.model_options import sampling_config
        from nodes.sampling.model_sampling import model_sampling_from_config

        model = require_model(model)
        patch = require_ref(model_patch, COMPONENT, "model_patch", "MODEL_PATCH")
        if patch.arch != ANIMA_LLLITE:
            raise ValueError(f"model_patch: AnimaLLLiteApply takes an Anima LLLite, not a {patch.arch} patch")
        if model.arch != "anima":
            raise ValueError(f"model: an Anima LLLite patches Anima models, not {model.arch}")
        if not isinstance(image, torch.Tensor) or image.ndim != 4 or image.shape[-1] < 3:
            raise ValueError("image: expected an IMAGE [B,H,W,C] with at least 3 channels")
        if int(patch.option("in_channels", 3)) != 4:
            mask = None  # ComfyUI reads a mask only for the inpainting layout (a zero mask when none is given)
        elif mask is not None and (not isinstance(mask, torch.Tensor) or mask.ndim not in (2, 3, 4)):
            raise ValueError("mask: expected a MASK [B,H,W]")
        ms = model_sampling_from_config(sampling_config(model))
        sigma_start, sigma_end = float(ms.percent_to_sigma(start_percent)), float(ms.percent_to_sigma(end_percent))
        entry = LLLitePatch.of(patch, image[..., :3], mask, strength, sigma_start, sigma_end)
        return (with_patch(model, entry),)


NODE_CLASS_MAPPINGS = {
    "AnimaLLLiteApply": AnimaLLLiteApply,
    "ModelPatchLoader": ModelPatchLoader,
    "QwenImageDiffsynthControlnet": QwenImageDiffsynthControlnet,
    "USOStyleReference": USOStyleReference,
}
NODE_DISPLAY_NAME_MAPPINGS = {"AnimaLLLiteApply": "Apply Anima LLLite"}
