"""Weight hooks (ComfyUI's comfy.hooks, the part its nodes_hooks family uses): a HOOKS value is a group of
weight hooks, each a LoRA file or another checkpoint applied "as a LoRA" (its difference to the base
weights), with a model and a CLIP strength and an optional keyframe schedule of strength multipliers.

Hooks travel as data: a cond entry's options hold its `HookGroup`; the sampling loop turns it into
`ScheduledHook`s (keyframe start percents as sigmas) in the step params; inside each denoise step the
entries are grouped by hooks and each group runs with the weights of the base MODEL plus its hooks at the
strengths the keyframes give at that model evaluation (`HookWeights`). Keyframe schedules are stateful in
ComfyUI (a keyframe holds for `guarantee_steps` evaluations before the next may take over), so their state
travels between steps as sampler state tensors, like the noise generator's.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from cluster.refs import ModelRef, Patch
from nodes.models.merge import OPTION as MERGES
from nodes.models.merge import merges, with_merge

STATE_KEY = "hook_keyframes."  # + keyframe group id: [index, used evaluations, last sigma] (float64)


def new_id() -> str:
    """The identity of a hook or a keyframe group: copies keep it, as ComfyUI's clones share their ref."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class HookKeyframe:
    """From `start_percent` of sampling on, the hooks' strengths are multiplied by `strength`;
    `guarantee_steps` model evaluations run with it before a later keyframe may take over."""

    strength: float
    start_percent: float = 0.0
    guarantee_steps: int = 1


@dataclass(frozen=True)
class HookKeyframes:
    """A HOOK_KEYFRAMES value: keyframes ordered by start percent (equal ones keep their order of addition).
    `uid` names the schedule's state; the hooks given one schedule by one SetHookKeyframes share it."""

    keyframes: tuple[HookKeyframe, ...] = ()
    uid: str = ""

    def add(self, keyframe: HookKeyframe) -> HookKeyframes:
        return replace(self, keyframes=tuple(sorted(self.keyframes + (keyframe,), key=lambda k: k.start_percent)))

    @property
    def initial_strength(self) -> float:
        """The multiplier before sampling advances the schedule: the first keyframe's (1.0 with none)."""
        return self.keyframes[0].strength if self.keyframes else 1.0


@dataclass(frozen=True)
class WeightHook:
    """One weight hook: `lora` (a LoRA file; its strength field unused) or `model`/`clip` (the diffusion model
    and text encoder of a checkpoint applied as a LoRA: strength * (its weights - the base's own weights))."""

    uid: str
    strength_model: float
    strength_clip: float
    lora: Patch | None = None
    model: ModelRef | None = None
    clip: ModelRef | None = None
    keyframes: HookKeyframes = field(default_factory=HookKeyframes)


@dataclass(frozen=True)
class HookGroup:
    """A HOOKS value. Adding a hook already present (same uid) keeps the first, as ComfyUI's groups do."""

    hooks: tuple[WeightHook, ...] = ()

    def combined(self, other: HookGroup | None) -> HookGroup:
        if other is None:
            return self
        have = {h.uid for h in self.hooks}
        extra = []
        for h in other.hooks:
            if h.uid not in have:
                have.add(h.uid)
                extra.append(h)
        return HookGroup(self.hooks + tuple(extra))

    def with_keyframes(self, keyframes: HookKeyframes) -> HookGroup:
        return HookGroup(tuple(replace(h, keyframes=keyframes) for h in self.hooks))

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(h.uid for h in self.hooks)


def combine_all(groups: Iterable[HookGroup | None]) -> HookGroup | None:
    """CombineHooks*: the given groups' hooks in order (None when none was given)."""
    present = [g for g in groups if g is not None]
    if not present:
        return None
    out = present[0]
    for g in present[1:]:
        out = out.combined(g)
    return out


# ---- weights -------------------------------------------------------------------------------------------------


def _unpatched(ref: ModelRef) -> ModelRef:
    """The weights of the ref's own files: the base a model-as-LoRA difference is taken from."""
    return replace(ref, patches=(), options=tuple((k, v) for k, v in ref.options if k != MERGES))


def hooked_ref(ref: ModelRef, hooks: Iterable[tuple[WeightHook, float]], target: str) -> ModelRef:
    """`ref` (a diffusion model, target "model", or a text encoder, target "clip") with each hook applied at
    its strength for the target times the given multiplier, after the ref's own patches, in group order. A
    LoRA hook is the patch LoraLoader would add (so a hook at a constant strength gives the very weights of
    LoraLoader at that strength); a model-as-LoRA hook adds strength * (other - unpatched base). Hooks at
    strength 0 change nothing and are left out, so the ref stays the base's (and shares its caches)."""
    base = None
    for hook, mult in hooks:
        strength = (hook.strength_model if target == "model" else hook.strength_clip) * mult
        if strength == 0:
            continue
        if hook.lora is not None:
            ref = ref.with_patch(Patch(hook.lora.path, hook.lora.digest, float(strength)))
            continue
        other = hook.model if target == "model" else hook.clip
        if other is None:
            continue
        if base is None:
            base = _unpatched(ref)
        ref = with_merge(ref, other, (("", 1.0, float(strength)),), minus=base)
    return ref


# ---- sampling-time schedules ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScheduledHook:
    """A hook in a denoise step's params: the hook and its keyframes' start percents as sigmas."""

    hook: WeightHook
    start_sigmas: tuple[float, ...]


def schedule(group: HookGroup | None, percent_to_sigma: Callable[[float], float]) -> tuple[ScheduledHook, ...]:
    if group is None:
        return ()
    return tuple(
        ScheduledHook(h, tuple(percent_to_sigma(k.start_percent) for k in h.keyframes.keyframes)) for h in group.hooks
    )


def _as(value: float, dtype: torch.dtype) -> float:
    # ComfyUI compares its float keyframe sigmas with the sampler's sigma tensors in their dtype.
    return float(torch.tensor(value, dtype=dtype))


def advance(hook: ScheduledHook, state: list[float], sigma: float, max_sigma: float, dtype: torch.dtype) -> None:
    """One model evaluation at `sigma` moves the schedule [index, used, last sigma] as ComfyUI's
    prepare_current_keyframe does: once the current keyframe has run its guaranteed evaluations, the
    following keyframes whose start sigma is >= sigma take over in turn, stopping at the first that
    guarantees evaluations. A keyframe starting before the sampled range (start sigma above the largest
    sigma) guarantees none. Repeated calls at one sigma (cond and uncond) count once."""
    kfs = hook.hook.keyframes.keyframes
    if not kfs or sigma == state[2]:
        return

    def guaranteed(i: int) -> int:
        return 0 if _as(hook.start_sigmas[i], dtype) > max_sigma else kfs[i].guarantee_steps

    index = int(state[0])
    if state[1] >= guaranteed(index):
        for i in range(index + 1, len(kfs)):
            if _as(hook.start_sigmas[i], dtype) >= sigma:
                index, state[0], state[1] = i, float(i), 0.0
                if guaranteed(i) > 0:
                    break
            else:
                break
    state[1] += 1
    state[2] = sigma


class HookWeights:
    """A denoise step's hooked weights: keyframe state per schedule (read from and written back to the
    step's sampler state) and the model for each hook group at the current strengths."""

    def __init__(
        self, base: ModelRef, state: dict[str, torch.Tensor], sigmas: torch.Tensor, load: Callable[[ModelRef], Any]
    ) -> None:
        self.base, self.state, self.load = base, state, load
        self.max_sigma = float(sigmas.max())
        self.dtype = sigmas.dtype

    def _state(self, hook: ScheduledHook) -> list[float]:
        key = STATE_KEY + hook.hook.keyframes.uid
        saved = self.state.get(key)
        return [0.0, 0.0, -1.0] if saved is None else saved.tolist()

    def prepare(self, hooks: Iterable[ScheduledHook], sigma: float) -> None:
        """Advance the schedules of the hooks of an entry evaluated at `sigma`."""
        for h in hooks:
            if h.hook.keyframes.keyframes:
                st = self._state(h)
                advance(h, st, sigma, self.max_sigma, self.dtype)
                self.state[STATE_KEY + h.hook.keyframes.uid] = torch.tensor(st, dtype=torch.float64)

    def strength(self, hook: ScheduledHook) -> float:
        kfs = hook.hook.keyframes.keyframes
        return kfs[int(self._state(hook)[0])].strength if kfs else 1.0

    def model(self, hooks: tuple[ScheduledHook, ...]) -> Any:
        return self.load(hooked_ref(self.base, [(h.hook, self.strength(h)) for h in hooks], "model"))


def entry_hooks(entry: dict) -> tuple[ScheduledHook, ...]:
    return entry.get("hooks", ())


def uses_hooks(*sides: list[dict] | None) -> bool:
    """Whether any cond entry of a denoise step's sides (positive, negative, middle) carries hooks."""
    return any(entry_hooks(e) for side in sides for e in (side or ()))


# ---- CLIP schedules -------------------------------------------------------------------------------------------


def clip_schedule(group: HookGroup) -> list[tuple[tuple[float, float], list[float]]]:
    """ComfyUI's get_hooks_for_clip_schedule: the percent ranges over which every hook's keyframe multiplier
    is constant, with those multipliers (one per hook, in group order; 1.0 where a hook has no keyframe for
    the range). Keyframes that do not change the strength do not split a range."""
    per_hook: list[list[tuple[tuple[float, float], float | None]]] = []
    for h in group.hooks:
        kfs = h.keyframes.keyframes
        if not kfs:
            per_hook.append([((0.0, 1.0), None)])
            continue
        ranges: list[tuple[tuple[float, float], float | None]] = []
        prev = kfs[0]
        for kf in kfs:
            if kf.start_percent > prev.start_percent and not math.isclose(kf.strength, prev.strength):
                ranges.append(((prev.start_percent, kf.start_percent), prev.strength))
                prev = kf
            elif kf.start_percent == prev.start_percent:
                prev = kf
        if not math.isclose(prev.start_percent, 1.0):
            ranges.append(((prev.start_percent, 1.0), prev.strength))
        per_hook.append(ranges)
    bounds = sorted({0.0} | {b for ranges in per_hook for r, _ in ranges for b in r})
    out = []
    for lo, hi in zip(bounds, bounds[1:]):
        mults = []
        for ranges in per_hook:
            found = next((s for (a, b), s in ranges if a < hi and b > lo), None)
            mults.append(1.0 if found is None else found)
        out.append(((lo, hi), mults))
    return out


@dataclass(frozen=True)
class ClipHooks:
    """What SetClipHooks put on a CLIP (as its `clip_hooks` option): the hooks, whether the conds it encodes
    carry them (`to_conds`), and whether encoding follows their keyframes (`scheduled`). `plain` is the CLIP
    before the hooks, `applied` the CLIP SetClipHooks returned (what was done to it later is told from it)."""

    group: HookGroup
    to_conds: bool
    scheduled: bool
    plain: ModelRef
    applied: ModelRef


CLIP_OPTION = "clip_hooks"


def set_clip_hooks(clip: ModelRef, group: HookGroup, to_conds: bool, scheduled: bool) -> ModelRef:
    """The CLIP every encoder uses with the hooks at their unscheduled strengths (ComfyUI's forced hooks:
    strength_clip, times the first keyframe's multiplier when scheduled), remembering the hooks."""
    plain = without_hooks(clip)  # a later SetClipHooks replaces the earlier hooks, as in ComfyUI
    mults = [h.keyframes.initial_strength if scheduled else 1.0 for h in group.hooks]
    patched = hooked_ref(plain, zip(group.hooks, mults), "clip")
    return patched.with_option(CLIP_OPTION, ClipHooks(group, to_conds, scheduled, plain, patched))


def without_hooks(clip: ModelRef) -> ModelRef:
    """The CLIP without SetClipHooks' weights but with everything done to it since (LoRAs, merges, options
    such as CLIPSetLastLayer), in their order: ComfyUI keeps hooks apart from a CLIP's own patches."""
    hooks: ClipHooks | None = clip.option(CLIP_OPTION)
    if hooks is None:
        return clip
    applied, out = hooks.applied, hooks.plain
    for name, value in clip.options:
        if name not in (CLIP_OPTION, MERGES) and applied.option(name) != value:
            out = out.with_option(name, value)
    later, done = clip.patches[len(applied.patches) :], 0
    for step in merges(clip)[len(merges(applied)) :]:
        upto = step.after_patches - len(applied.patches)
        for patch in later[done:upto]:
            out = out.with_patch(patch)
        done = upto
        out = with_merge(out, step.other, step.rules, step.minus)
    for patch in later[done:]:
        out = out.with_patch(patch)
    return out


def encodings(clip: ModelRef) -> list[tuple[ModelRef, dict[str, Any]]]:
    """The (CLIP to encode with, options to add to the cond) pairs one text encode makes: one with no hooks or
    unscheduled hooks, else one per clip_schedule range (with clip_start_percent/clip_end_percent)."""
    hooks: ClipHooks | None = clip.option(CLIP_OPTION)
    if hooks is None:
        return [(clip, {})]
    extra: dict[str, Any] = {"hooks": hooks.group} if hooks.to_conds else {}
    if not hooks.scheduled:
        return [(clip, extra)]
    plain = without_hooks(clip)
    return [
        (
            hooked_ref(plain, zip(hooks.group.hooks, mults), "clip"),
            {"clip_start_percent": lo, "clip_end_percent": hi, **extra},
        )
        for (lo, hi), mults in clip_schedule(hooks.group)
    ]
