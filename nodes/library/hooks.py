"""ComfyUI's comfy_extras.nodes_hooks: weight hooks (a LoRA, or a checkpoint as a LoRA) that apply to the
cond entries carrying them, with keyframe schedules of their strength, and the nodes that attach hooks,
masks, timestep ranges and "default" status to conditioning. The values are data
(nodes.modelfns.hooks); the denoise steps apply the hooks' weights per entry group on the executors."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import torch

from cluster.refs import Patch, file_digest
from nodes.conditioning import require
from nodes.conditioning_ops import set_values
from nodes.inputs import require_ref
from nodes.loaders import CheckpointLoaderSimple, model_file
from nodes.modelfns.hooks import HookGroup, HookKeyframe, HookKeyframes, WeightHook, combine_all, new_id, set_clip_hooks
from nodes.workspace import active

log = logging.getLogger(__name__)
MODULE = "comfy_extras.nodes_hooks"
INTERPOLATIONS = ["linear", "ease_in", "ease_out", "ease_in_out"]
STRENGTH = ("FLOAT", {"default": 1.0, "min": -20.0, "max": 20.0, "step": 0.01})
PERCENT = {"min": 0.0, "max": 1.0, "step": 0.001}
PROPS_REQUIRED = {
    "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 10.0, "step": 0.01}),
    "set_cond_area": (["default", "mask bounds"],),
}
PROPS_OPTIONAL = {"mask": ("MASK",), "hooks": ("HOOKS",), "timesteps": ("TIMESTEPS_RANGE",)}


def _hooks(value: Any, input_name: str) -> HookGroup | None:
    if value is not None and not isinstance(value, HookGroup):
        raise ValueError(f"{input_name}: expected HOOKS, got {type(value).__name__}")
    return value


def _keyframes(value: Any, input_name: str) -> HookKeyframes:
    if value is None:
        return HookKeyframes()
    if not isinstance(value, HookKeyframes):
        raise ValueError(f"{input_name}: expected HOOK_KEYFRAMES, got {type(value).__name__}")
    return value


# ---- conditioning ---------------------------------------------------------------------------------------------


def with_hooks(conditioning: list, hooks: HookGroup | None) -> list:
    """Each entry with `hooks` added after the hooks it already carries."""
    if hooks is None:
        return conditioning
    return [
        [cond, {**opts, "hooks": opts["hooks"].combined(hooks) if opts.get("hooks") is not None else hooks}]
        for cond, opts in conditioning
    ]


def with_properties(
    conditioning: list,
    strength: float,
    set_cond_area: str,
    mask: torch.Tensor | None,
    hooks: HookGroup | None,
    timesteps: tuple[float, float] | None,
) -> list:
    """ComfyUI's set_conds_props for one CONDITIONING: hooks, then a mask (its strength is the mask's
    weight; "mask bounds" restricts the entry to the mask's bounding box), then a timestep range."""
    out = with_hooks(conditioning, hooks)
    if mask is not None:
        out = set_values(
            out,
            {
                "mask": mask.unsqueeze(0) if mask.ndim < 3 else mask,
                "set_area_to_bounds": set_cond_area != "default",
                "mask_strength": strength,
            },
        )
    if timesteps is not None:
        out = set_values(out, {"start_percent": timesteps[0], "end_percent": timesteps[1]})
    return out


def with_default(conditioning: list, hooks: HookGroup | None) -> list:
    return set_values(with_hooks(conditioning, hooks), {"default": True})


class _Hooks:
    RELATIVE_PYTHON_MODULE = MODULE
    EXPERIMENTAL = True


class ConditioningSetProperties(_Hooks):
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"cond_NEW": ("CONDITIONING",), **PROPS_REQUIRED}, "optional": dict(PROPS_OPTIONAL)}

    RETURN_TYPES = ("CONDITIONING",)
    CATEGORY = "advanced/hooks/cond single"
    FUNCTION = "set_properties"
    DESCRIPTION = "Attaches hooks, a mask and a timestep range to every entry of a conditioning."

    def set_properties(self, cond_NEW, strength, set_cond_area, mask=None, hooks=None, timesteps=None):
        return (
            with_properties(
                require(cond_NEW, "cond_NEW"), strength, set_cond_area, mask, _hooks(hooks, "hooks"), timesteps
            ),
        )


class ConditioningSetPropertiesAndCombine(_Hooks):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"cond": ("CONDITIONING",), "cond_NEW": ("CONDITIONING",), **PROPS_REQUIRED},
            "optional": dict(PROPS_OPTIONAL),
        }

    RETURN_TYPES = ("CONDITIONING",)
    CATEGORY = "advanced/hooks/cond single"
    FUNCTION = "set_properties"
    DESCRIPTION = "Sets hooks, mask and timestep range on cond_NEW and appends its entries to cond."

    def set_properties(self, cond, cond_NEW, strength, set_cond_area, mask=None, hooks=None, timesteps=None):
        new = with_properties(
            require(cond_NEW, "cond_NEW"), strength, set_cond_area, mask, _hooks(hooks, "hooks"), timesteps
        )
        return (require(cond, "cond") + new,)


class PairConditioningSetProperties(_Hooks):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"positive_NEW": ("CONDITIONING",), "negative_NEW": ("CONDITIONING",), **PROPS_REQUIRED},
            "optional": dict(PROPS_OPTIONAL),
        }

    RETURN_TYPES = ("CONDITIONING", "CONDITIONING")
    RETURN_NAMES = ("positive", "negative")
    CATEGORY = "advanced/hooks/cond pair"
    FUNCTION = "set_properties"
    DESCRIPTION = "Attaches hooks, a mask and a timestep range to a positive and negative conditioning."

    def set_properties(
        self, positive_NEW, negative_NEW, strength, set_cond_area, mask=None, hooks=None, timesteps=None
    ):
        hooks = _hooks(hooks, "hooks")
        return tuple(
            with_properties(require(c, n), strength, set_cond_area, mask, hooks, timesteps)
            for c, n in ((positive_NEW, "positive_NEW"), (negative_NEW, "negative_NEW"))
        )


class PairConditioningSetPropertiesAndCombine(_Hooks):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "positive": ("CONDITIONING",),
                "negative": ("CONDITIONING",),
                "positive_NEW": ("CONDITIONING",),
                "negative_NEW": ("CONDITIONING",),
                **PROPS_REQUIRED,
            },
            "optional": dict(PROPS_OPTIONAL),
        }

    RETURN_TYPES = ("CONDITIONING", "CONDITIONING")
    RETURN_NAMES = ("positive", "negative")
    CATEGORY = "advanced/hooks/cond pair"
    FUNCTION = "set_properties"
    DESCRIPTION = "Sets hooks, mask and timestep range on the NEW pair and appends it to positive and negative."

    def set_properties(
        self,
        positive,
        negative,
        positive_NEW,
        negative_NEW,
        strength,
        set_cond_area,
        mask=None,
        hooks=None,
        timesteps=None,
    ):
        hooks = _hooks(hooks, "hooks")
        return tuple(
            require(base, bn) + with_properties(require(new, nn), strength, set_cond_area, mask, hooks, timesteps)
            for base, bn, new, nn in (
                (positive, "positive", positive_NEW, "positive_NEW"),
                (negative, "negative", negative_NEW, "negative_NEW"),
            )
        )


class PairConditioningCombine(_Hooks):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "positive_A": ("CONDITIONING",),
                "negative_A": ("CONDITIONING",),
                "positive_B": ("CONDITIONING",),
                "negative_B": ("CONDITIONING",),
            }
        }

    RETURN_TYPES = ("CONDITIONING", "CONDITIONING")
    RETURN_NAMES = ("positive", "negative")
    CATEGORY = "advanced/hooks/cond pair"
    FUNCTION = "combine"
    DESCRIPTION = "Appends the B pair's entries to the A pair's."

    def combine(self, positive_A, negative_A, positive_B, negative_B):
        return (
            require(positive_A, "positive_A") + require(positive_B, "positive_B"),
            require(negative_A, "negative_A") + require(negative_B, "negative_B"),
        )


class ConditioningSetDefaultCombine(_Hooks):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"cond": ("CONDITIONING",), "cond_DEFAULT": ("CONDITIONING",)},
            "optional": {"hooks": ("HOOKS",)},
        }

    RETURN_TYPES = ("CONDITIONING",)
    CATEGORY = "advanced/hooks/cond single"
    FUNCTION = "set_default_and_combine"
    DESCRIPTION = (
        "Appends cond_DEFAULT as a default: it guides only where the other entries leave weight "
        "uncovered (outside their masks and areas)."
    )

    def set_default_and_combine(self, cond, cond_DEFAULT, hooks=None):
        return (require(cond, "cond") + with_default(require(cond_DEFAULT, "cond_DEFAULT"), _hooks(hooks, "hooks")),)


class PairConditioningSetDefaultCombine(_Hooks):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "positive": ("CONDITIONING",),
                "negative": ("CONDITIONING",),
                "positive_DEFAULT": ("CONDITIONING",),
                "negative_DEFAULT": ("CONDITIONING",),
            },
            "optional": {"hooks": ("HOOKS",)},
        }

    RETURN_TYPES = ("CONDITIONING", "CONDITIONING")
    RETURN_NAMES = ("positive", "negative")
    CATEGORY = "advanced/hooks/cond pair"
    FUNCTION = "set_default_and_combine"
    DESCRIPTION = "Appends the DEFAULT pair as defaults to positive and negative (see Cond Set Default Combine)."

    def set_default_and_combine(self, positive, negative, positive_DEFAULT, negative_DEFAULT, hooks=None):
        hooks = _hooks(hooks, "hooks")
        return (
            require(positive, "positive") + with_default(require(positive_DEFAULT, "positive_DEFAULT"), hooks),
            require(negative, "negative") + with_default(require(negative_DEFAULT, "negative_DEFAULT"), hooks),
        )


class ConditioningTimestepsRange(_Hooks):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "start_percent": ("FLOAT", {"default": 0.0, **PERCENT}),
                "end_percent": ("FLOAT", {"default": 1.0, **PERCENT}),
            }
        }

    RETURN_TYPES = ("TIMESTEPS_RANGE", "TIMESTEPS_RANGE", "TIMESTEPS_RANGE")
    RETURN_NAMES = ("TIMESTEPS_RANGE", "BEFORE_RANGE", "AFTER_RANGE")
    CATEGORY = "advanced/hooks"
    FUNCTION = "create_range"
    DESCRIPTION = "A part of sampling as start/end percents, with the parts before and after it."

    def create_range(self, start_percent, end_percent):
        return ((start_percent, end_percent), (0.0, start_percent), (end_percent, 1.0))


class SetClipHooks(_Hooks):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "clip": ("CLIP",),
                "apply_to_conds": ("BOOLEAN", {"default": True}),
                "schedule_clip": ("BOOLEAN", {"default": False}),
            },
            "optional": {"hooks": ("HOOKS",)},
        }

    RETURN_TYPES = ("CLIP",)
    CATEGORY = "advanced/hooks/clip"
    FUNCTION = "apply_hooks"
    DESCRIPTION = (
        "Applies hooks' CLIP weights when this CLIP encodes; apply_to_conds also attaches the hooks "
        "to the conds it makes, schedule_clip encodes once per keyframe range."
    )

    def apply_hooks(self, clip, apply_to_conds, schedule_clip, hooks=None):
        require_ref(clip, "text_encoder", "clip", "CLIP")
        hooks = _hooks(hooks, "hooks")
        if hooks is None:
            return (clip,)
        return (set_clip_hooks(clip, hooks, bool(apply_to_conds), bool(schedule_clip)),)


# ---- creating hooks -------------------------------------------------------------------------------------------


class CreateHookLora(_Hooks):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "lora_name": (active().list_files("loras"),),
                "strength_model": STRENGTH,
                "strength_clip": STRENGTH,
            },
            "optional": {"prev_hooks": ("HOOKS",)},
        }

    MODEL_FILE_INPUTS = {"lora_name": ("loras", "lora")}  # checked at validation (nodes.model_checks)
    RETURN_TYPES = ("HOOKS",)
    CATEGORY = "advanced/hooks/create"
    FUNCTION = "create_hook"
    DESCRIPTION = "A hook that applies a LoRA to the conds it is attached to (model) and to a CLIP (clip)."

    def create_hook(self, lora_name, strength_model, strength_clip, prev_hooks=None):
        prev = _hooks(prev_hooks, "prev_hooks") or HookGroup()
        if strength_model == 0 and strength_clip == 0:
            return (prev,)
        path = model_file("loras", lora_name, "lora_name")
        hook = WeightHook(
            new_id(), float(strength_model), float(strength_clip), lora=Patch(str(path), file_digest(path), 1.0)
        )
        return (prev.combined(HookGroup((hook,))),)


class CreateHookLoraModelOnly(CreateHookLora):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"lora_name": (active().list_files("loras"),), "strength_model": STRENGTH},
            "optional": {"prev_hooks": ("HOOKS",)},
        }

    FUNCTION = "create_hook_model_only"
    DESCRIPTION = "A hook that applies a LoRA to the diffusion model only."

    def create_hook_model_only(self, lora_name, strength_model, prev_hooks=None):
        return self.create_hook(lora_name, strength_model, 0.0, prev_hooks)


class CreateHookModelAsLora(_Hooks):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "ckpt_name": (active().list_files("checkpoints"),),
                "strength_model": STRENGTH,
                "strength_clip": STRENGTH,
            },
            "optional": {"prev_hooks": ("HOOKS",)},
        }

    MODEL_FILE_INPUTS = {"ckpt_name": ("checkpoints", "diffusion_model")}
    RETURN_TYPES = ("HOOKS",)
    CATEGORY = "advanced/hooks/create"
    FUNCTION = "create_hook"
    DESCRIPTION = (
        "A hook that moves the weights towards another checkpoint's: strength times its difference "
        "to the base model's own weights."
    )

    def create_hook(self, ckpt_name, strength_model, strength_clip, prev_hooks=None):
        prev = _hooks(prev_hooks, "prev_hooks") or HookGroup()
        model, clip, _ = CheckpointLoaderSimple().load_checkpoint(ckpt_name)
        hook = WeightHook(new_id(), float(strength_model), float(strength_clip), model=model, clip=clip)
        return (prev.combined(HookGroup((hook,))),)


class CreateHookModelAsLoraModelOnly(CreateHookModelAsLora):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"ckpt_name": (active().list_files("checkpoints"),), "strength_model": STRENGTH},
            "optional": {"prev_hooks": ("HOOKS",)},
        }

    FUNCTION = "create_hook_model_only"
    DESCRIPTION = "A hook that moves the diffusion model's weights towards another checkpoint's."

    def create_hook_model_only(self, ckpt_name, strength_model, prev_hooks=None):
        return self.create_hook(ckpt_name, strength_model, 0.0, prev_hooks)


# ---- scheduling -----------------------------------------------------------------------------------------------


class SetHookKeyframes(_Hooks):
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"hooks": ("HOOKS",)}, "optional": {"hook_kf": ("HOOK_KEYFRAMES",)}}

    RETURN_TYPES = ("HOOKS",)
    CATEGORY = "advanced/hooks/scheduling"
    FUNCTION = "set_hook_keyframes"
    DESCRIPTION = "Schedules the hooks' strengths with keyframes (all the hooks share one schedule)."

    def set_hook_keyframes(self, hooks, hook_kf=None):
        hooks = _hooks(hooks, "hooks")
        if hook_kf is None:
            return (hooks,)
        kf = _keyframes(hook_kf, "hook_kf")
        return (hooks.with_keyframes(HookKeyframes(kf.keyframes, new_id())),)


class CreateHookKeyframe(_Hooks):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"strength_mult": STRENGTH, "start_percent": ("FLOAT", {"default": 0.0, **PERCENT})},
            "optional": {"prev_hook_kf": ("HOOK_KEYFRAMES",)},
        }

    RETURN_TYPES = ("HOOK_KEYFRAMES",)
    RETURN_NAMES = ("HOOK_KF",)
    CATEGORY = "advanced/hooks/scheduling"
    FUNCTION = "create_hook_keyframe"
    DESCRIPTION = "Adds a keyframe: from start_percent on, hook strengths are multiplied by strength_mult."

    def create_hook_keyframe(self, strength_mult, start_percent, prev_hook_kf=None):
        prev = _keyframes(prev_hook_kf, "prev_hook_kf")
        return (prev.add(HookKeyframe(float(strength_mult), float(start_percent))),)


def _spread(keyframes: HookKeyframes, percents: torch.Tensor, strengths: Iterable[float]) -> HookKeyframes:
    """Keyframes at `percents` with `strengths`; only the first guarantees an evaluation, so a later one
    takes over as soon as sampling reaches it."""
    for k, (percent, strength) in enumerate(zip(percents.tolist(), strengths)):
        keyframes = keyframes.add(HookKeyframe(float(strength), float(percent), 1 if k == 0 else 0))
    return keyframes


def interpolate(start: float, end: float, count: int, method: str) -> list[float]:
    """`count` strengths from start to end along the curve (in float32, as ComfyUI computes them)."""
    index = torch.linspace(0, 1, count)
    diff = end - start
    if method == "linear":
        return torch.linspace(start, end, count).tolist()
    if method == "ease_in":
        curve = index**2
    elif method == "ease_out":
        curve = 1 - (1 - index) ** 2
    elif method == "ease_in_out":
        curve = (1 - torch.cos(index * torch.pi)) / 2
    else:
        raise ValueError(f"interpolation: unknown method {method!r} (one of {', '.join(INTERPOLATIONS)})")
    return (diff * curve + start).tolist()


class CreateHookKeyframesInterpolated(_Hooks):
    @classmethod
    def INPUT_TYPES(cls):
        strength = {"min": 0.0, "max": 10.0, "step": 0.001}
        return {
            "required": {
                "strength_start": ("FLOAT", {"default": 1.0, **strength}),
                "strength_end": ("FLOAT", {"default": 1.0, **strength}),
                "interpolation": (INTERPOLATIONS,),
                "start_percent": ("FLOAT", {"default": 0.0, **PERCENT}),
                "end_percent": ("FLOAT", {"default": 1.0, **PERCENT}),
                "keyframes_count": ("INT", {"default": 5, "min": 2, "max": 100, "step": 1}),
                "print_keyframes": ("BOOLEAN", {"default": False}),
            },
            "optional": {"prev_hook_kf": ("HOOK_KEYFRAMES",)},
        }

    RETURN_TYPES = ("HOOK_KEYFRAMES",)
    RETURN_NAMES = ("HOOK_KF",)
    CATEGORY = "advanced/hooks/scheduling"
    FUNCTION = "create_hook_keyframes"
    DESCRIPTION = "keyframes_count keyframes evenly spread over a percent range, strengths along a curve."

    def create_hook_keyframes(
        self,
        strength_start,
        strength_end,
        interpolation,
        start_percent,
        end_percent,
        keyframes_count,
        print_keyframes=False,
        prev_hook_kf=None,
    ):
        percents = torch.linspace(start_percent, end_percent, keyframes_count)
        strengths = interpolate(strength_start, strength_end, keyframes_count, interpolation)
        out = _spread(_keyframes(prev_hook_kf, "prev_hook_kf"), percents, strengths)
        if print_keyframes:
            for p, s in zip(percents.tolist(), strengths):
                log.info("Hook keyframe: start_percent %s, strength %s", p, s)
        return (out,)


class CreateHookKeyframesFromFloats(_Hooks):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "floats_strength": ("FLOATS", {"default": -1, "min": -1, "step": 0.001, "forceInput": True}),
                "start_percent": ("FLOAT", {"default": 0.0, **PERCENT}),
                "end_percent": ("FLOAT", {"default": 1.0, **PERCENT}),
                "print_keyframes": ("BOOLEAN", {"default": False}),
            },
            "optional": {"prev_hook_kf": ("HOOK_KEYFRAMES",)},
        }

    RETURN_TYPES = ("HOOK_KEYFRAMES",)
    RETURN_NAMES = ("HOOK_KF",)
    CATEGORY = "advanced/hooks/scheduling"
    FUNCTION = "create_hook_keyframes"
    DESCRIPTION = "One keyframe per given strength, evenly spread over a percent range."

    def create_hook_keyframes(
        self, floats_strength, start_percent, end_percent, print_keyframes=False, prev_hook_kf=None
    ):
        if isinstance(floats_strength, (int, float)) and not isinstance(floats_strength, bool):
            strengths = [float(floats_strength)]
        elif isinstance(floats_strength, Iterable) and not isinstance(floats_strength, (str, bytes)):
            strengths = [float(s) for s in floats_strength]
        else:
            raise ValueError(
                f"floats_strength: expected a float or a list of floats, got {type(floats_strength).__name__}"
            )
        percents = torch.linspace(start_percent, end_percent, len(strengths))
        out = _spread(_keyframes(prev_hook_kf, "prev_hook_kf"), percents, strengths)
        if print_keyframes:
            for p, s in zip(percents.tolist(), strengths):
                log.info("Hook keyframe: start_percent %s, strength %s", p, s)
        return (out,)


# ---- combining ------------------------------------------------------------------------------------------------


def _combine_node(letters: str) -> type:
    class CombineHooks(_Hooks):
        @classmethod
        def INPUT_TYPES(cls):
            return {"required": {}, "optional": {f"hooks_{c}": ("HOOKS",) for c in letters}}

        RETURN_TYPES = ("HOOKS",)
        CATEGORY = "advanced/hooks/combine"
        FUNCTION = "combine_hooks"
        DESCRIPTION = "One HOOKS value with the hooks of every input, in input order."

        def combine_hooks(self, **hooks):
            return (combine_all(_hooks(hooks.get(f"hooks_{c}"), f"hooks_{c}") for c in letters),)

    CombineHooks.__name__ = CombineHooks.__qualname__ = f"CombineHooks{len(letters)}"
    return CombineHooks


CombineHooks2, CombineHooks4, CombineHooks8 = (_combine_node(s) for s in ("AB", "ABCD", "ABCDEFGH"))

NODE_CLASS_MAPPINGS = {
    "CreateHookLora": CreateHookLora,
    "CreateHookLoraModelOnly": CreateHookLoraModelOnly,
    "CreateHookModelAsLora": CreateHookModelAsLora,
    "CreateHookModelAsLoraModelOnly": CreateHookModelAsLoraModelOnly,
    "SetHookKeyframes": SetHookKeyframes,
    "CreateHookKeyframe": CreateHookKeyframe,
    "CreateHookKeyframesInterpolated": CreateHookKeyframesInterpolated,
    "CreateHookKeyframesFromFloats": CreateHookKeyframesFromFloats,
    "CombineHooks2": CombineHooks2,
    "CombineHooks4": CombineHooks4,
    "CombineHooks8": CombineHooks8,
    "ConditioningSetProperties": ConditioningSetProperties,
    "ConditioningSetPropertiesAndCombine": ConditioningSetPropertiesAndCombine,
    "PairConditioningSetProperties": PairConditioningSetProperties,
    "PairConditioningSetPropertiesAndCombine": PairConditioningSetPropertiesAndCombine,
    "ConditioningSetDefaultCombine": ConditioningSetDefaultCombine,
    "PairConditioningSetDefaultCombine": PairConditioningSetDefaultCombine,
    "PairConditioningCombine": PairConditioningCombine,
    "SetClipHooks": SetClipHooks,
    "ConditioningTimestepsRange": ConditioningTimestepsRange,
}
NODE_DISPLAY_NAME_MAPPINGS = {
    "CreateHookLora": "Create Hook LoRA",
    "CreateHookLoraModelOnly": "Create Hook LoRA (MO)",
    "CreateHookModelAsLora": "Create Hook Model as LoRA",
    "CreateHookModelAsLoraModelOnly": "Create Hook Model as LoRA (MO)",
    "SetHookKeyframes": "Set Hook Keyframes",
    "CreateHookKeyframe": "Create Hook Keyframe",
    "CreateHookKeyframesInterpolated": "Create Hook Keyframes Interp.",
    "CreateHookKeyframesFromFloats": "Create Hook Keyframes From Floats",
    "CombineHooks2": "Combine Hooks [2]",
    "CombineHooks4": "Combine Hooks [4]",
    "CombineHooks8": "Combine Hooks [8]",
    "ConditioningSetProperties": "Cond Set Props",
    "ConditioningSetPropertiesAndCombine": "Cond Set Props Combine",
    "PairConditioningSetProperties": "Cond Pair Set Props",
    "PairConditioningSetPropertiesAndCombine": "Cond Pair Set Props Combine",
    "ConditioningSetDefaultCombine": "Cond Set Default Combine",
    "PairConditioningSetDefaultCombine": "Cond Pair Set Default Combine",
    "PairConditioningCombine": "Cond Pair Combine",
    "SetClipHooks": "Set CLIP Hooks",
    "ConditioningTimestepsRange": "Timesteps Range",
}
