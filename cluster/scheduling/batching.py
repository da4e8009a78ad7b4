"""Batching same-model invocations from different requests into one call (DiffServe's per-model batch
size, chosen by the cascade controller, is the cap).

Which calls may share one forward pass is the ModelFn's to say (`ModelFn.batch_key`, default: none);
this module knows no model. Equal keys mean everything that shapes the computation is the same apart
from the batch; a ModelFn usually builds its key with `layout_key`: the ModelFn, the weights
(ModelRef), every param but those it names as unread in a batch (values the computation never reads), and
each tensor input's layout (`ModelFn.input_layout`: per sample, or shared by all). `merge` concatenates the per-sample tensors along the batch (a batch-1 tensor
expanded to its request's batch), `run_merged` runs the real ModelFn once on the executor, and `split`
cuts every output back into the requests' parts.

A ModelFn whose calls differ in more than their samples (a denoising step: any sampler, seed, schedule or
CFG scale on the same model) runs a batch itself instead (`ModelFn.execute_batch`: each call whole, the
forward passes shared inside), and `merge` only keeps its calls together.

On the cluster the caller tags each invocation with `batch_tag` (a digest of its key, and its samples);
the head groups ready invocations with equal tags up to the model's batch-size cap and sends them to
one executor as one message; the executor merges, runs once, splits, and charges each request its
share of the measured time (`charge_shares`). A merged run that fails is re-run part by part.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from cluster.call import Params
from cluster.modelfn import ModelFn, get_model_fn
from cluster.refs import ModelRef


@dataclass(frozen=True)
class Call:
    """One invocation as the head holds it: which ModelFn on which weights, tensors and its params."""

    fn: str
    ref: ModelRef | None
    inputs: dict[str, torch.Tensor | None]
    params: Params

    @property
    def size(self) -> int:
        x = self.inputs.get("x")
        return int(x.shape[0]) if isinstance(x, torch.Tensor) else 1


@dataclass(frozen=True)
class Merged:
    """The batched call and what `split` needs to cut its outputs back."""

    fn: str
    ref: ModelRef
    inputs: dict[str, torch.Tensor | None]
    params: Params
    sizes: tuple[int, ...]
    ndim: int  # x's rank: outputs of this rank are per sample, one more a stack of per-sample tensors
    calls: tuple[Call, ...] = ()  # for a ModelFn that runs its batches itself (`runs_own_batches`): the calls


def freeze(value: Any) -> Hashable:
    """A hashable, order-independent image of a params value (dicts, lists, tuples, scalars, refs)."""
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), freeze(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(freeze(v) for v in value))
    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype), tuple(value.shape), tuple(value.flatten().tolist()))
    hash(value)  # raises TypeError for anything else unhashable
    return value


def batchable(fn: str) -> bool:
    """Whether calls of ModelFn `fn` may ever be batched (it overrides `batch_key`)."""
    try:
        cls = get_model_fn(fn)
    except KeyError:
        return False
    return cls.batch_key.__func__ is not ModelFn.batch_key.__func__


def runs_own_batches(cls: type[ModelFn]) -> bool:
    """Whether the ModelFn merges a batch of calls itself (`ModelFn.execute_batch`) instead of being run once
    on their concatenated inputs."""
    return cls.execute_batch is not ModelFn.execute_batch


def batch_key(call: Call) -> Hashable | None:
    """Equal keys: the calls can run as one batch. None: this call runs alone."""
    try:
        cls = get_model_fn(call.fn)
    except KeyError:
        return None
    return cls.batch_key(call)


def layout_key(cls: type[ModelFn], call: Call, unbatched_params: Sequence[str] = ()) -> Hashable | None:
    """The usual key: the ModelFn, the weights, the params but `unbatched_params` (values a batch may
    mix because the computation never reads them), and every tensor input's layout; None when an input
    has no layout (cannot be batched) or a param is unhashable."""
    if call.ref is None:
        return None
    x = call.inputs.get("x")
    if not isinstance(x, torch.Tensor) or x.ndim < 2:
        return None
    n, ndim = int(x.shape[0]), x.ndim
    layout = []
    for name in sorted(call.inputs):
        t = call.inputs[name]
        if t is None:
            layout.append((name, None))
            continue
        if not isinstance(t, torch.Tensor):
            return None
        entry = cls.input_layout(name, t, n, ndim)
        if entry is None:
            return None
        layout.append((name, entry))
    try:
        fields = call.params.__struct_fields__
        params = freeze({k: getattr(call.params, k) for k in fields if k not in unbatched_params})
    except TypeError:
        return None
    return (call.fn, call.ref.key, params, tuple(layout))


def batch_tag(
    fn: str, ref: ModelRef | None, inputs: dict[str, torch.Tensor | None], params: Params
) -> tuple[str | None, int]:
    """What the head groups by: a short digest of `batch_key` (None: the call runs alone) and the
    call's samples. The key's repr is deterministic: tensors were frozen into numbers, and an object
    without a value repr only makes the keys differ, never equal by accident."""
    if not batchable(fn):
        return None, 1
    call = Call(fn, ref, inputs, params)
    key = batch_key(call)
    return (None if key is None else hashlib.sha256(repr(key).encode()).hexdigest()[:32]), call.size


def plan_batches(calls: Sequence[Call], max_batch: int) -> list[list[int]]:
    """Group the calls (indices, in arrival order) into batches of compatible calls holding at most
    `max_batch` samples; a call that cannot be batched, or is larger than the cap, runs alone."""
    groups: list[list[int]] = []
    open_group: dict[Hashable, int] = {}  # key -> index in `groups` of the batch still filling
    load: list[int] = []
    for i, call in enumerate(calls):
        key = batch_key(call)
        g = open_group.get(key) if key is not None else None
        if g is not None and load[g] + call.size <= max_batch:
            groups[g].append(i)
            load[g] += call.size
            continue
        groups.append([i])
        load.append(call.size)
        if key is not None:
            open_group[key] = len(groups) - 1
    return groups


def merge(calls: Sequence[Call]) -> Merged:
    """One call for compatible calls: per-sample tensors concatenated along the batch (conditioning of
    batch 1 expanded to its request's batch first), shared ones taken once."""
    keys = {batch_key(c) for c in calls}
    if None in keys or len(keys) != 1:
        raise ValueError("merge: the calls are not batch-compatible (see batch_key)")
    first = calls[0]
    cls = get_model_fn(first.fn)
    sizes = tuple(c.size for c in calls)
    ndim = first.inputs["x"].ndim
    if runs_own_batches(cls):
        return Merged(first.fn, first.ref, {}, first.params, sizes, ndim, tuple(calls))
    inputs: dict[str, torch.Tensor | None] = {}
    for name, t in first.inputs.items():
        if t is None:
            inputs[name] = None
            continue
        if cls.input_layout(name, t, sizes[0], ndim)[0] == "shared":
            inputs[name] = t
        else:
            inputs[name] = torch.cat(
                [c.inputs[name].expand(n, *c.inputs[name].shape[1:]) for c, n in zip(calls, sizes)], dim=0
            )
    return Merged(first.fn, first.ref, inputs, first.params, sizes, ndim)


def split(merged: Merged, outputs: dict[str, torch.Tensor | None]) -> list[dict[str, torch.Tensor | None]]:
    """Each request's part of the merged call's outputs, in the order the calls were merged."""
    total = sum(merged.sizes)
    parts: list[dict[str, torch.Tensor | None]] = [{} for _ in merged.sizes]
    for name, t in outputs.items():
        if t is None or not isinstance(t, torch.Tensor):
            pieces: Sequence[Any] = [t] * len(parts)
        elif t.ndim == merged.ndim and t.shape[0] == total:
            pieces = t.split(list(merged.sizes), dim=0)
        elif t.ndim == merged.ndim + 1 and t.shape[1] == total:
            pieces = [p.contiguous() for p in t.split(list(merged.sizes), dim=1)]
        elif t.numel() <= 16:
            pieces = [t] * len(parts)  # a per-step scalar: the same for every request
        else:
            raise ValueError(f"split: output {name!r} of shape {tuple(t.shape)} does not follow the batch")
        for part, piece in zip(parts, pieces):
            part[name] = piece
    return parts


def run_merged(fn: ModelFn, model: Any, merged: Merged) -> list[dict[str, torch.Tensor | None]]:
    """The executor side: run the real ModelFn once on the merged call and split its outputs (or hand the
    calls to the ModelFn that runs its batches itself)."""
    if merged.calls:
        return fn.execute_batch(model, merged.calls)
    return split(merged, fn.execute(model, merged.inputs, merged.params))


def charge_shares(sizes: Sequence[int], seconds: float) -> list[float]:
    """Each request's share of a batched call's measured time, in proportion to its samples."""
    total = sum(sizes)
    return [seconds * n / total for n in sizes]
