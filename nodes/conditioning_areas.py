"""Area and mask conditioning as ComfyUI's sampler applies them.

Head side (`resolve`, once per sampling run, like ComfyUI's process_conds): percentage areas become latent
cells, masks are resized to the latent, "mask bounds" areas are read off the mask, and every area entry of
one side gets an opposite entry of the same area on the other sides (the smallest containing entry's
embeddings with the area entry's options), so that guidance compares like with like.

Executor side (`area_and_mult`, every step, like ComfyUI's get_area_and_mult): the crop of the latent an
entry predicts on and the weight its prediction is blended with; the weights of a side are summed and its
weighted predictions divided by them (calc_cond_batch), so cells no entry covers predict zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

# Options that ComfyUI turns into model inputs (its "model_conds"); an opposite-area entry takes them from
# the entry whose embeddings it borrows, everything else from the area entry.
MODEL_COND_KEYS = (
    "pooled_output",
    "guidance",
    "width",
    "height",
    "crop_w",
    "crop_h",
    "target_width",
    "target_height",
    "aesthetic_score",
)
FEATHER = 8  # cells over which an area's edge ramps up, where it borders other content
WHOLE = 2147483648  # the size ComfyUI gives a dimension an area does not name (a 2-D area on a video latent)


def resolve(sides: list[list], latent_shape: Sequence[int]) -> list[list]:
    """CONDITIONING lists of the sides of one guider (positive first) with areas in latent cells,
    masks at the latent's size and batch [B,h,w], and the opposite-area entries added."""
    batch, dims = int(latent_shape[0]), tuple(int(d) for d in latent_shape[2:])
    out = [[_resolved(cond, opts, dims, batch) for cond, opts in side] for side in sides]
    for k, side in enumerate(out):
        for entry in side:  # a live walk: entries added to a later side are visited too, as in ComfyUI
            for kk, other in enumerate(out):
                if kk != k:
                    _add_same_area(other, entry)
    return out


def _resolved(cond: torch.Tensor, opts: dict, dims: tuple[int, ...], batch: int) -> list:
    area = opts.get("area")
    if area is None and opts.get("mask") is None:
        return [cond, opts]
    opts = dict(opts)
    if area is not None and area[0] == "percentage":
        # sizes then offsets, one per latent dimension, read from the first of the area's (as ComfyUI reads them)
        fractions = area[1:]
        half = len(fractions) // 2
        if half < len(dims):
            raise ValueError(
                f"conditioning: a percentage area of {half} dimensions on a latent of {len(dims)} ({tuple(dims)})"
            )
        opts["area"] = tuple(max(1, round(fractions[d] * dims[d])) for d in range(len(dims))) + tuple(
            round(fractions[half + d] * dims[d]) for d in range(len(dims))
        )
    mask = opts.get("mask")
    if mask is not None:
        mask = mask.unsqueeze(0) if mask.ndim == 2 else mask
        if tuple(mask.shape[1:]) != tuple(dims):
            mask = torch.nn.functional.interpolate(mask.unsqueeze(1), size=tuple(dims), mode="bilinear").squeeze(1)
        if opts.get("set_area_to_bounds", False):
            opts["area"] = _mask_bounds(mask)  # over the whole mask batch, as ComfyUI reads it
        opts["mask"] = _to_batch(mask, batch)
    return [cond, opts]


def _to_batch(mask: torch.Tensor, batch: int) -> torch.Tensor:
    """The masks ComfyUI's sampler weights the latent's samples with: the first `batch`, repeated when there
    are fewer. Resolved here, so that a step merged with other requests' steps pairs each sample with its mask."""
    mask = mask[:batch]
    if batch % mask.shape[0]:
        raise ValueError(f"conditioning: a batch of {mask.shape[0]} masks cannot weigh a latent batch of {batch}")
    return mask.repeat(batch // mask.shape[0], 1, 1)


def _mask_bounds(mask: torch.Tensor) -> tuple[int, int, int, int]:
    """(h, w, y, x) of the cells any mask of the batch touches, at least 8x8; an empty mask gives the
    smallest area at the origin (it weighs nothing anyway)."""
    bounds = torch.max(torch.abs(mask), dim=0).values
    if not bool(torch.any(bounds != 0)):
        return (8, 8, 0, 0)
    ys, xs = torch.where(bounds != 0)
    y0, y1, x0, x1 = int(ys.min()), int(ys.max()), int(xs.min()), int(xs.max())
    return (max(8, y1 - y0 + 1), max(8, x1 - x0 + 1), y0, x0)


def _with_dims(area: Sequence[int], n: int) -> list[int]:
    """An area of fewer dimensions than n widened with whole leading dimensions at offset 0."""
    area = list(area)
    while len(area) // 2 < n:
        half = len(area) // 2
        area = [WHOLE] + area[:half] + [0] + area[half:]
    return area


def _inside(a: Sequence[int], outer: Sequence[int]) -> bool:
    a, outer = _with_dims(a, len(outer) // 2), _with_dims(outer, len(a) // 2)
    na, no = len(a) // 2, len(outer) // 2
    return all(a[na + i] >= outer[no + i] and a[i] + a[na + i] <= outer[i] + outer[no + i] for i in range(min(na, no)))


def _add_same_area(side: list, entry: list) -> None:
    """ComfyUI's create_cond_with_same_area_if_none for one area entry against one other side."""
    area = entry[1].get("area")
    if area is None:
        return
    smallest = None
    for other in side:
        other_area = other[1].get("area")
        if other_area is not None:
            if _inside(area, other_area):
                if smallest is None or smallest[1].get("area") is None:
                    smallest = other
                elif _cells(smallest[1]["area"]) > _cells(other_area):
                    smallest = other
        elif smallest is None:
            smallest = other
    if smallest is None or smallest[1].get("area") == area:
        return
    opts = {k: v for k, v in entry[1].items() if k not in MODEL_COND_KEYS}
    opts.update((k, v) for k, v in smallest[1].items() if k in MODEL_COND_KEYS)
    side.append([smallest[0], opts])


def _cells(area: tuple) -> int:
    return math.prod(area[: len(area) // 2])


def area_and_mult(
    entry: dict[str, Any], mask: torch.Tensor | None, x: torch.Tensor
) -> tuple[tuple[int, ...] | None, torch.Tensor]:
    """(the area clipped to the latent, sizes then offsets per latent dimension, or None for all of it; the
    blend weight of the entry's prediction on that crop [B,C,...]): the mask times mask_strength, times strength,
    with an area's inner edges feathered when it has no mask. An area of fewer dimensions than the latent covers
    the leading ones whole; of more, its first ones are read (as ComfyUI does)."""
    n = x.dim() - 2
    area = None
    if entry.get("area") is not None:
        area = _with_dims(entry["area"], n)
        if len(area) // 2 > n:
            area = area[:n] + area[len(area) // 2 : len(area) // 2 + n]
    crop = x
    if area is not None:
        for i in range(n):
            area[i] = min(x.shape[i + 2] - area[n + i], area[i])
            crop = crop.narrow(i + 2, area[n + i], area[i])
    masked = mask is not None
    if masked:
        mask = mask[: crop.shape[0]]
        if area is not None:
            for i in range(n):
                mask = mask.narrow(i + 1, area[n + i], area[i])
        mask = mask * entry.get("mask_strength", 1.0)
        mask = mask.unsqueeze(1).repeat((crop.shape[0] // mask.shape[0], crop.shape[1]) + (1,) * (mask.dim() - 1))
    else:
        mask = torch.ones_like(crop)
    mult = mask * entry["strength"]
    if not masked and area is not None:
        for i in range(n):
            ramp = min(FEATHER, mult.shape[2 + i] // 4)
            if area[n + i] != 0:
                for t in range(ramp):
                    mult.narrow(i + 2, t, 1).mul_((1.0 / ramp) * (t + 1))
            if area[i] + area[n + i] < x.shape[i + 2]:
                for t in range(ramp):
                    mult.narrow(i + 2, area[i] - 1 - t, 1).mul_((1.0 / ramp) * (t + 1))
    return (None if area is None else tuple(area)), mult


def crop(t: torch.Tensor, area: tuple[int, ...] | None) -> torch.Tensor:
    """The area of a [B,C,...] tensor (a view), or all of it; the area as area_and_mult gives it."""
    if area is None:
        return t
    n = len(area) // 2
    for i in range(n):
        t = t.narrow(i + 2, area[n + i], area[i])
    return t
