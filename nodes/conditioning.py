"""CONDITIONING as ComfyUI shapes it, and its flattening into ModelFn inputs.

A CONDITIONING value is `[[tensor, options], ...]`; options may hold "pooled_output",
"start_percent"/"end_percent", "strength", "guidance" and "control" (a `ControlSpec` chain).
A denoising-step invocation receives the tensors by name and the rest as plain params.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef


@dataclass(frozen=True, eq=False)
class ControlSpec:
    """One applied ControlNet (ControlNetApply*). `previous` chains several ControlNets on one cond."""
    ref: ModelRef
    hint: torch.Tensor          # IMAGE [B,H,W,3]
    strength: float
    start_percent: float = 0.0
    end_percent: float = 1.0
    previous: "ControlSpec | None" = None

    def chain(self) -> list["ControlSpec"]:
        out, node = [], self
        while node is not None:
            out.append(node)
            node = node.previous
        return out[::-1]


def flatten(name: str, conditioning: list, percent_to_sigma) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]]]:
    """Split one CONDITIONING into named tensors and per-entry metadata for a denoise-step call."""
    tensors: dict[str, torch.Tensor] = {}
    entries: list[dict[str, Any]] = []
    for j, (cond, opts) in enumerate(conditioning):
        key = f"{name}.{j}"
        tensors[f"{key}.context"] = cond
        if opts.get("pooled_output") is not None:
            tensors[f"{key}.pooled"] = opts["pooled_output"]
        controls = []
        spec = opts.get("control")
        for k, c in enumerate(spec.chain() if spec is not None else []):
            tensors[f"{key}.control.{k}.hint"] = c.hint
            controls.append({"ref": c.ref, "strength": c.strength, "hint_id": id(c.hint),
                             "sigma_start": percent_to_sigma(c.start_percent),
                             "sigma_end": percent_to_sigma(c.end_percent)})
        entries.append({
            "key": key,
            "strength": float(opts.get("strength", 1.0)),
            "sigma_start": percent_to_sigma(opts.get("start_percent", 0.0)),
            "sigma_end": percent_to_sigma(opts.get("end_percent", 1.0)),
            "guidance": opts.get("guidance"),
            "controls": controls,
        })
    return tensors, entries


def require(conditioning: Any, input_name: str) -> list:
    """A CONDITIONING input, or a clear error naming the input."""
    if not isinstance(conditioning, list) or not all(
            isinstance(e, (list, tuple)) and len(e) == 2 and isinstance(e[0], torch.Tensor) for e in conditioning):
        raise ValueError(f"{input_name}: expected CONDITIONING ([[tensor, dict], ...]), got {type(conditioning).__name__}")
    return conditioning
