"""`comfy.hooks`: hook groups, keyframe schedules and the conditioning helpers that attach them.

HOOKS and HOOK_KEYFRAMES values are the core's (nodes.modelfns.hooks), so hooks made by the core
CreateHookLora / SetHookKeyframes nodes and by a pack are the same values and sample the same way.
`HookKeyframe` and `HookKeyframeGroup` take ComfyUI's constructor arguments and `clone()` / in-place
`add()`, as pack code building a schedule expects. The conditioning helpers (`set_conds_props`,
`set_conds_props_and_combine`, `set_default_conds_and_combine`, ...) write the same option keys the core
hook nodes write. Hooks from an in-memory LoRA dict (`create_hook_lora`, `load_hook_lora_for_models`) carry
it as a file, as the core hooks name the LoRA files the executors load.
"""

from __future__ import annotations

import enum
import math
from typing import Any

import torch

from comfy_bridge.packs.origin import UnsupportedFeature
from nodes.conditioning_ops import set_values
from nodes.library.hooks import with_default, with_hooks, with_properties
from nodes.modelfns import hooks as core

HookGroup = core.HookGroup
WeightHook = core.WeightHook


class EnumHookMode(enum.Enum):
    MinVram = "minvram"
    MaxSpeed = "maxspeed"


class EnumHookType(enum.Enum):
    Weight = "weight"
    ObjectPatch = "object_patch"
    AdditionalModels = "add_models"
    TransformerOptions = "transformer_options"
    Injections = "add_injections"


class EnumWeightTarget(enum.Enum):
    Model = "model"
    Clip = "clip"


class EnumHookScope(enum.Enum):
    AllConditioning = "all_conditioning"
    HookedOnly = "hooked_only"


class HookKeyframe(core.HookKeyframe):
    """From `start_percent` on, hook strengths are multiplied by `strength` (a number or a 0-d tensor)."""

    def __init__(self, strength: Any, start_percent: Any = 0.0, guarantee_steps: Any = 1):
        super().__init__(float(strength), float(start_percent), int(guarantee_steps))

    def clone(self) -> HookKeyframe:
        return HookKeyframe(self.strength, self.start_percent, self.guarantee_steps)


class HookKeyframeGroup(core.HookKeyframes):
    """A HOOK_KEYFRAMES value pack code fills in place: `HookKeyframeGroup()`, then `add(...)` per keyframe
    (kept ordered by start percent), `clone()` for a copy to extend."""

    def __init__(self, keyframes: tuple = (), uid: str = ""):
        super().__init__(tuple(keyframes), uid or core.new_id())

    def add(self, keyframe: core.HookKeyframe) -> HookKeyframeGroup:
        ordered = tuple(sorted(self.keyframes + (keyframe,), key=lambda k: k.start_percent))
        object.__setattr__(self, "keyframes", ordered)
        return self

    def clone(self) -> HookKeyframeGroup:
        return HookKeyframeGroup(self.keyframes)

    def is_empty(self) -> bool:
        return not self.keyframes

    def has_index(self, index: int) -> bool:
        return 0 <= index < len(self.keyframes)

    @property
    def strength(self) -> float:
        return self.initial_strength


class InterpolationMethod:
    """Strength curves from num_from to num_to over `length` points."""

    LINEAR = "linear"
    EASE_IN = "ease_in"
    EASE_OUT = "ease_out"
    EASE_IN_OUT = "ease_in_out"
    _LIST = [LINEAR, EASE_IN, EASE_OUT, EASE_IN_OUT]

    @classmethod
    def get_weights(
        cls, num_from: float, num_to: float, length: int, method: str, reverse: bool = False
    ) -> torch.Tensor:
        if method == cls.LINEAR:
            weights = torch.linspace(num_from, num_to, length)
        else:
            t = torch.linspace(0, 1, length)
            if method == cls.EASE_IN:
                shape = t**2
            elif method == cls.EASE_OUT:
                shape = 1 - (1 - t) ** 2
            elif method == cls.EASE_IN_OUT:
                shape = (1 - torch.cos(t * math.pi)) / 2
            else:
                raise ValueError(f"Unrecognized interpolation method '{method}'.")
            weights = (num_to - num_from) * shape + num_from
        return weights.flip(dims=(0,)) if reverse else weights


def _check_hooks(hooks: Any) -> Any:
    if hooks is not None and not isinstance(hooks, core.HookGroup):
        raise TypeError(f"comfy.hooks: expected a HOOKS value (HookGroup), got {type(hooks).__name__}")
    return hooks


def conditioning_set_values_with_hooks(
    conditioning: list, values: dict | None = None, append_hooks: bool = True, cache: dict | None = None
) -> list:
    """`values` written into every entry; with append_hooks, "hooks" is added after the entry's own hooks."""
    values = dict(values or {})
    hooks = values.pop("hooks", None) if append_hooks else None
    out = set_values(conditioning, values)
    return with_hooks(out, _check_hooks(hooks)) if append_hooks else out


def set_hooks_for_conditioning(cond: list, hooks: Any, append_hooks: bool = True, cache: dict | None = None) -> list:
    if hooks is None:
        return cond
    if append_hooks:
        return with_hooks(cond, _check_hooks(hooks))
    return set_values(cond, {"hooks": _check_hooks(hooks)})


def set_timesteps_for_conditioning(cond: list, timestep_range: tuple[float, float] | None) -> list:
    if timestep_range is None:
        return cond
    return set_values(cond, {"start_percent": timestep_range[0], "end_percent": timestep_range[1]})


def set_mask_for_conditioning(cond: list, mask: torch.Tensor | None, set_cond_area: str, strength: float) -> list:
    if mask is None:
        return cond
    return with_properties(cond, strength, set_cond_area, mask, None, None)


def combine_conditioning(conds: list) -> list:
    return [entry for cond in conds for entry in cond]


def combine_with_new_conds(conds: list, new_conds: list) -> list:
    return [list(c) + list(n) for c, n in zip(conds, new_conds)]


def set_conds_props(
    conds: list,
    strength: float,
    set_cond_area: str,
    mask: torch.Tensor | None = None,
    hooks: Any = None,
    timesteps_range: tuple[float, float] | None = None,
    append_hooks: bool = True,
) -> list:
    """Each conditioning with hooks, then mask (with its strength and area mode), then timestep range."""
    out = []
    for c in conds:
        c = set_hooks_for_conditioning(c, hooks, append_hooks=append_hooks)
        out.append(with_properties(c, strength, set_cond_area, mask, None, timesteps_range))
    return out


def set_conds_props_and_combine(
    conds: list,
    new_conds: list,
    strength: float = 1.0,
    set_cond_area: str = "default",
    mask: torch.Tensor | None = None,
    hooks: Any = None,
    timesteps_range: tuple[float, float] | None = None,
    append_hooks: bool = True,
) -> list:
    """set_conds_props on each new conditioning, appended to the matching one of `conds`."""
    new = set_conds_props(new_conds, strength, set_cond_area, mask, hooks, timesteps_range, append_hooks)
    return combine_with_new_conds(conds, new)


def set_default_conds_and_combine(
    conds: list,
    new_conds: list,
    hooks: Any = None,
    timesteps_range: tuple[float, float] | None = None,
    append_hooks: bool = True,
) -> list:
    """Each new conditioning marked "default" (used where no other entry covers), appended to `conds`."""
    out = []
    for c, n in zip(conds, new_conds):
        n = set_hooks_for_conditioning(n, hooks, append_hooks=append_hooks)
        n = set_timesteps_for_conditioning(with_default(n, None), timesteps_range)
        out.append(list(c) + n)
    return out


def create_hook_lora(lora: dict, strength_model: float, strength_clip: float) -> HookGroup:
    """A HOOKS group with one weight hook applying the LoRA state dict `lora` (as the core CreateHookLora node
    does with a file: the dict is written once as one, comfy.state_dict_files)."""
    from cluster.refs import Patch, file_digest
    from comfy_bridge.compat.comfy.state_dict_files import state_dict_file

    path = state_dict_file(lora, "comfy.hooks.create_hook_lora")
    hook = WeightHook(
        core.new_id(), float(strength_model), float(strength_clip), lora=Patch(str(path), file_digest(path), 1.0)
    )
    return HookGroup((hook,))


def create_hook_model_as_lora(
    weights_model: Any, weights_clip: Any, strength_model: float, strength_clip: float
) -> Any:
    raise UnsupportedFeature(
        "comfy.hooks.create_hook_model_as_lora",
        "hooks built from in-memory weights; use the core CreateHookModelAsLora node",
    )


def load_hook_lora_for_models(
    model: Any, clip: Any, lora: dict, strength_model: float, strength_clip: float
) -> tuple[Any, Any, HookGroup]:
    """(model clone, clip clone, HOOKS): the hook group applies the LoRA to the model where conds carry it and to
    the CLIP where SetClipHooks sets it, as ComfyUI's hook patches do (here the hook carries the LoRA)."""
    hooks = create_hook_lora(
        lora, strength_model if model is not None else 0.0, strength_clip if clip is not None else 0.0
    )
    return (None if model is None else model.clone()), (None if clip is None else clip.clone()), hooks


class WrapperHook:
    """ComfyUI's hook that adds model wrappers during sampling; ComfyUI's hook registry is not run by the
    executors, so making one raises UnsupportedFeature."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedFeature("comfy.hooks.WrapperHook", "ComfyUI's hook registry is not supported")
