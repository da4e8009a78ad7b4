"""Model merging as data: a merged MODEL/CLIP is model1's ModelRef with a `("merges", (MergeStep, ...))`
option naming model2's ref and the strengths per key prefix. The weights are combined where the ref is
loaded (nodes/models/loader.py), so a merge is cached, dispatched and saved like any other ref.

Semantics are ComfyUI's `add_patches(..., strength_patch, strength_model)` with model2's full weight as a
"diff" patch: w = w1 * strength_model + strength_patch * w2, computed in float32, keys of model1 only,
shape mismatches left unmerged (with a warning). Steps and LoRA patches apply in the order they were added."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch

from cluster.refs import ModelRef

from .lora import LoraTargets, merge_loras

log = logging.getLogger(__name__)
OPTION = "merges"


@dataclass(frozen=True)
class MergeStep:
    """One merge of `other` into a ref. `after_patches` is how many of the base ref's LoRA patches were
    added before it (they apply first). `rules` are (key prefix, strength_model, strength_patch); for a key
    the longest matching prefix wins, "" matches every key. Prefixes are ComfyUI's key names relative to
    the component ("input_blocks.0." for an ldm UNet). With `minus`, model2 is other's weights less minus's
    (ComfyUI's "model_as_lora" patch of weight hooks: the difference to the base's own weights)."""

    other: ModelRef
    after_patches: int
    rules: tuple[tuple[str, float, float], ...]
    minus: ModelRef | None = None

    def strengths(self, name: str) -> tuple[float, float] | None:
        best: tuple[str, float, float] | None = None
        for rule in self.rules:
            if name.startswith(rule[0]) and (best is None or len(rule[0]) > len(best[0])):
                best = rule
        return None if best is None else (best[1], best[2])


def with_merge(
    base: ModelRef, other: ModelRef, rules: tuple[tuple[str, float, float], ...], minus: ModelRef | None = None
) -> ModelRef:
    """`base` merged with `other`: base's options (CLIP skip, sampling settings) carry on, other's don't,
    as ComfyUI clones model1 and takes only model2's weights."""
    if base.component != other.component:
        raise ValueError(f"cannot merge a {base.component} with a {other.component}")
    return base.with_option(OPTION, merges(base) + (MergeStep(other, len(base.patches), rules, minus),))


def merges(ref: ModelRef) -> tuple[MergeStep, ...]:
    return tuple(ref.option(OPTION, ()))


def merge_weights(
    sd: dict[str, torch.Tensor], other: dict[str, torch.Tensor], step: MergeStep, name_of: Callable[[str], str]
) -> tuple[dict[str, torch.Tensor], int]:
    """`sd` with `other` merged in by `step` (a new dict). `name_of` maps a key of `sd` to the name the
    rules' prefixes address. Returns (state dict, number of weights merged)."""
    out = dict(sd)
    count = 0
    for key, w1 in sd.items():
        w2 = other.get(key)
        strengths = step.strengths(name_of(key))
        if w2 is None or strengths is None or not w1.is_floating_point():
            continue
        strength_model, strength_patch = strengths
        weight = w1.float()
        if strength_model != 1.0:
            weight = weight * strength_model
        if strength_patch != 0.0:
            if w2.shape != w1.shape:
                log.warning(
                    "merge: %s has shape %s in model2 and %s in model1; weight not merged",
                    name_of(key),
                    tuple(w2.shape),
                    tuple(w1.shape),
                )
            else:
                weight = weight + strength_patch * w2.float()
        out[key] = weight
        count += 1
    return out, count


def patch_weights(
    ref: ModelRef,
    targets: LoraTargets,
    sd: dict[str, torch.Tensor],
    name_of: Callable[[str], str],
    weights_of: Callable[[ModelRef], dict[str, torch.Tensor]],
) -> tuple[dict[str, torch.Tensor], int]:
    """`sd` (one component's weights, keyed like `targets`) with the ref's LoRA patches and merges applied
    in the order they were added. `weights_of(other)` gives another ref's weights, its own patches and
    merges applied, with the same keys. Returns (state dict, number of weights changed)."""
    done = count = 0
    for step in merges(ref):
        sd, n = merge_loras(ref.patches[done : step.after_patches], targets, sd)
        count += n
        done = step.after_patches
        other = weights_of(step.other)
        if step.minus is not None:  # float32 differences, on the keys both have with one shape
            less = weights_of(step.minus)
            other = {
                k: w.float() - less[k].float()
                for k, w in other.items()
                if k in less and less[k].shape == w.shape and w.is_floating_point()
            }
        sd, n = merge_weights(sd, other, step, name_of)
        count += n
    sd, n = merge_loras(ref.patches[done:], targets, sd)
    return sd, count + n
