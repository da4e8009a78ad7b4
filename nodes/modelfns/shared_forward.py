"""Denoising steps of different requests sharing the network's forward passes (cluster.scheduling.batching).

A batch of `denoise_step` calls runs every call's whole step as a lane: its guider, its sampler's arithmetic
and its own noise stream, exactly as the call alone would. A lane that reaches the network (`network_apply`)
parks there; once every lane is parked or done, the parked evaluations that agree on the network, the
input's dtype and shape past the batch and the conditioning's layout run as one forward pass (each sample at
its own timestep with its own conditioning), and each lane resumes with its rows. A sampler that evaluates
the model several times a step parks again; lanes meet wherever their evaluations line up and run alone
where they do not.

Lanes are greenlets, not threads: one OS thread runs them in turn, so torch's thread-local settings
(inference mode, intra-op threads), the executor's CPU clock and the ModelFn's caches are those of the
unbatched step, and the order lanes run in (and so every result) never depends on timing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import greenlet
import torch


@dataclass
class Evaluation:
    """One parked call of the network: what `DiffusionModel.apply` takes."""

    model: Any
    x: torch.Tensor
    t: torch.Tensor
    cond: dict[str, Any]


@dataclass
class _Done:
    value: Any


class _Lane(greenlet.greenlet):
    """A step run in lockstep with others (its parent is the greenlet running `run_lanes`)."""


def network_apply(model: Any, x: torch.Tensor, t: torch.Tensor, cond: dict[str, Any]) -> torch.Tensor:
    """model.apply(x, t, cond); inside a lane, parked until the lanes' compatible evaluations run together."""
    lane = greenlet.getcurrent()
    if not isinstance(lane, _Lane):
        return model.apply(x, t, cond)
    return lane.parent.switch(Evaluation(model, x, t, cond))


def run_lanes(steps: Sequence[Callable[[], Any]]) -> tuple[list[Any], int]:
    """Run `steps` in lockstep, sharing forward passes; (their results in order, forward passes run). An
    exception of a step or of a shared pass propagates (the caller re-runs the steps one by one)."""
    lanes = [_Lane(run=lambda step=step: _Done(step())) for step in steps]
    results: list[Any] = [None] * len(lanes)
    passes = 0
    resume: dict[int, torch.Tensor | None] = dict.fromkeys(range(len(lanes)))
    try:
        while resume:
            parked: dict[int, Evaluation] = {}
            for i, value in resume.items():
                out = lanes[i].switch(value) if lanes[i] else lanes[i].switch()
                if isinstance(out, _Done):
                    results[i] = out.value
                else:
                    parked[i] = out
            resume = {}
            for group in _groups(parked):
                resume.update(zip(group, evaluate([parked[i] for i in group])))
                passes += 1
    finally:
        for lane in lanes:
            if lane:  # started and not finished: a step or a pass failed; unwind its `finally`s
                lane.throw()
    return results, passes


def _groups(parked: dict[int, Evaluation]) -> list[list[int]]:
    """The lanes whose evaluations can share a pass, in lane order; an evaluation without a signature alone."""
    groups: dict[Hashable, list[int]] = {}
    alone: list[list[int]] = []
    for i, e in parked.items():
        sig = signature(e)
        if sig is None:
            alone.append([i])
        else:
            groups.setdefault(sig, []).append(i)
    return sorted([*groups.values(), *alone])


def signature(e: Evaluation) -> Hashable | None:
    """Equal signatures: the evaluations can run as one pass. Per-sample tensors (those as long as the batch)
    may differ in values; everything else must be equal. None: an input the merge cannot see into (a
    ControlNet's residuals object), so the evaluation runs alone."""
    n = e.x.shape[0]
    if e.t.ndim < 1 or e.t.shape[0] != n:
        return None
    cond = _value_signature(e.cond, n)
    if cond is None:
        return None
    return (id(e.model), _rows(e.x), _rows(e.t), cond)


def _rows(t: torch.Tensor) -> tuple:
    return ("rows", str(t.dtype), str(t.device), tuple(t.shape[1:]))


def _value_signature(v: Any, n: int) -> Hashable | None:
    if v is None or isinstance(v, (bool, int, float, str)):
        return ("same", type(v).__name__, v)
    if isinstance(v, torch.Tensor):
        if v.ndim >= 1 and v.shape[0] == n:
            return _rows(v)
        data = v.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        return ("same", str(v.dtype), tuple(v.shape), hashlib.sha256(data).hexdigest())
    if type(v) in (list, tuple):
        items = tuple(_value_signature(item, n) for item in v)
        return None if None in items else (type(v).__name__, items)
    if type(v) is dict:
        items = tuple((str(k), _value_signature(item, n)) for k, item in sorted(v.items()))
        return None if any(s is None for _, s in items) else ("dict", items)
    return None


def _join(values: list[Any], sizes: list[int]) -> Any:
    """One value for the merged pass: per-sample tensors concatenated, containers joined item by item, the
    rest (equal in every evaluation, the signatures said so) taken from the first."""
    first = values[0]
    if isinstance(first, torch.Tensor) and first.ndim >= 1 and first.shape[0] == sizes[0]:
        return torch.cat(values)
    if type(first) in (list, tuple):
        return type(first)(_join([v[i] for v in values], sizes) for i in range(len(first)))
    if type(first) is dict:
        return {k: _join([v[k] for v in values], sizes) for k in first}
    return first


def evaluate(group: list[Evaluation]) -> list[torch.Tensor]:
    """Run evaluations of equal signature as one forward pass; each one's rows of the output."""
    if len(group) == 1:
        e = group[0]
        return [e.model.apply(e.x, e.t, e.cond)]
    sizes = [e.x.shape[0] for e in group]
    x = torch.cat([e.x for e in group])
    t = torch.cat([e.t for e in group])
    out = group[0].model.apply(x, t, _join([e.cond for e in group], sizes))
    if not isinstance(out, torch.Tensor) or out.shape[0] != sum(sizes):
        raise ValueError(f"a shared forward pass gave {type(out).__name__} not following the batch of {sum(sizes)}")
    return list(out.split(sizes))
