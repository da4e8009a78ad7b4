"""GLIGEN in the denoising step: which conditioning entries run its layers and with which object tokens.

GLIGENTextBoxApply leaves on each entry `gligen`: {"ref": the GLIGEN ModelRef, "boxes": [[height, width, y, x] in
latent cells, ...], "source": the entry key whose `<key>.gligen.<i>` tensors are the boxes' pooled texts}.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import torch


def fill_other_side(positive: list[dict], other: list[dict]) -> list[dict]:
    """ComfyUI's apply_empty_x_to_equal_area for 'gligen': unless an entry of the other side (without an area)
    has text boxes already, the i-th positive entry's boxes go to the other side's (i mod n)-th entry without an
    area, a later one replacing an earlier one."""
    boxes = [e["gligen"] for e in positive if "area" not in e and e.get("gligen")]
    if any("area" not in e and e.get("gligen") for e in other):
        return other
    open_slots = [i for i, e in enumerate(other) if "area" not in e]
    if not boxes or not open_slots:
        return other
    out = list(other)
    for i, spec in enumerate(boxes):
        slot = open_slots[i % len(open_slots)]
        out[slot] = {**other[slot], "gligen": spec}
    return out


def group_key(entry: dict) -> Hashable:
    """Entries share a forward pass only with the same GLIGEN boxes (or none)."""
    spec = entry.get("gligen")
    if not spec:
        return None
    return spec["ref"].key, spec["source"], tuple(tuple(b) for b in spec["boxes"])


def step_objects(entry: dict, inputs: dict[str, torch.Tensor], load: Callable[[Any], Any], xb: torch.Tensor):
    """(the GLIGEN model, its object tokens for the batch `xb`), boxes placed on xb's latent size."""
    spec = entry["gligen"]
    model = load(spec["ref"])
    model.module.to(xb.device)  # loaded beside the layer cache, like a ControlNet: it follows the step
    boxes = [(inputs[f"{spec['source']}.gligen.{i}"], *box) for i, box in enumerate(spec["boxes"])]
    return model, model.objects(boxes, tuple(xb.shape[-2:]), xb.shape[0])
