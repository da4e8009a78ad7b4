"""Context windows (ComfyUI's comfy.context_windows, as in 0.10.0): a model evaluation over a latent longer than
`length` along `dim` (video frames, or the batch) is made window by window and the windows' predictions blended.

The MODEL carries the settings (ContextWindowsManual); the denoise step cuts x and the conditioning tensors of
that length along `dim` into the schedule's windows, evaluates each side (positive, negative) per window and
blends each side's predictions with the fuse method's weights before CFG, as ComfyUI's calc_cond_batch does.
FreeNoise shuffles the initial noise once, on the head, before the first step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch

SCHEDULES = ("standard_static", "standard_uniform", "looped_uniform", "batched")
FUSE_METHODS = ("pyramid", "relative", "flat", "overlap-linear")
OPTION = "context_windows"  # the MODEL option holding a ContextWindows' fields


@dataclass(frozen=True)
class ContextWindows:
    schedule: str
    fuse: str
    length: int
    overlap: int
    stride: int
    closed_loop: bool
    dim: int
    freenoise: bool

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(f"context_schedule: unknown schedule {self.schedule!r} (one of {', '.join(SCHEDULES)})")
        if self.fuse not in FUSE_METHODS:
            raise ValueError(f"fuse_method: unknown fuse method {self.fuse!r} (one of {', '.join(FUSE_METHODS)})")
        if self.length < 1 or self.overlap < 0 or self.stride < 1:
            raise ValueError("context_length and context_stride must be at least 1, context_overlap at least 0")
        # a window must advance: ComfyUI fails inside sampling (or divides by zero) when it does not
        if self.schedule != "batched" and self.overlap >= self.length:
            raise ValueError(
                f"context_overlap ({self.overlap}) must be less than context_length ({self.length}) "
                f"for the {self.schedule} schedule"
            )

    def as_param(self) -> dict:
        return asdict(self)

    def applies(self, x: torch.Tensor) -> bool:
        if self.dim >= x.dim():
            raise ValueError(
                f"context windows: dim {self.dim} is past the latent's {x.dim()} dimensions {tuple(x.shape)}"
            )
        return x.shape[self.dim] > self.length


def ordered_halving(step: int) -> float:
    """The bits of `step` mirrored into a 64-bit binary fraction: 0, 1/2, 1/4, 3/4, ... (the uniform schedules'
    per-step offset)."""
    return int(f"{step:064b}"[::-1], 2) / 2**64


def _uniform(n: int, cw: ContextWindows, step: int, tail: int) -> list[list[int]]:
    windows = []
    stride = min(cw.stride, int(np.ceil(np.log2(n / cw.length))) + 1)
    offset = ordered_halving(step)
    for spacing in (1 << k for k in range(stride)):
        pad = round(n * offset)
        for start in range(int(offset * spacing) + pad, n + pad + tail, cw.length * spacing - cw.overlap):
            windows.append([f % n for f in range(start, start + cw.length * spacing, spacing)])
    return windows


def _first_wrap(window: list[int], n: int) -> int | None:
    """Where a window wraps past the last frame back to the first, or None."""
    for k in range(1, len(window)):
        if window[k] % n < window[k - 1] % n:
            return k
    return None


def _standard_uniform(n: int, cw: ContextWindows, step: int) -> list[list[int]]:
    """The looped windows, each wrapping one moved to end on the last frame (plus a window from the frame it
    wrapped at when the next window lacks it), repeats dropped."""
    windows = _uniform(n, cw, step, -cw.overlap)
    repeats = []
    k = 0
    while k < len(windows):
        at = _first_wrap(windows[k], n)
        if at is not None:
            wrapped_to = windows[k][at]
            first = windows[k][0]
            relative = [(f - first + n) % n for f in windows[k]]
            windows[k] = [f + n - relative[-1] - 1 for f in relative]
            if wrapped_to not in windows[(k + 1) % len(windows)]:
                windows.insert(k + 1, list(range(wrapped_to, wrapped_to + cw.length)))
        if any(windows[k] == windows[j] for j in range(k)):
            repeats.append(k)
        k += 1
    for k in reversed(repeats):
        windows.pop(k)
    return windows


def windows(cw: ContextWindows, n: int, step: int) -> list[list[int]]:
    """The frame indices of each window over `n` frames at sampling step `step`."""
    if n < cw.length or (n == cw.length and cw.schedule != "looped_uniform"):
        return [list(range(n))]
    if cw.schedule == "looped_uniform":
        return _uniform(n, cw, step, 0 if cw.closed_loop else -cw.overlap)
    if cw.schedule == "standard_uniform":
        return _standard_uniform(n, cw, step)
    if cw.schedule == "batched":
        return [list(range(s, min(s + cw.length, n))) for s in range(0, n, cw.length)]
    out = []
    for start in range(0, n, cw.length - cw.overlap):  # standard_static: the last window ends on the last frame
        if start + cw.length >= n:
            out.append(list(range(n - cw.length, n)))
            break
        out.append(list(range(start, start + cw.length)))
    return out


def fuse_weights(cw: ContextWindows, window: list[int], n: int) -> torch.Tensor:
    """A window's per-frame weights: flat ones; a pyramid rising from 1 at each edge; or ones ramping linearly
    over the overlap on each side that has a neighbour (overlap-linear)."""
    size = len(window)
    if cw.fuse == "flat":
        return torch.Tensor([1.0] * size)
    if cw.fuse in ("pyramid", "relative"):
        half = list(range(1, (size + 1) // 2 + 1))
        return torch.Tensor(half + half[::-1] if size % 2 == 0 else half + half[-2::-1])
    weights = torch.ones(size)
    if min(window) > 0:
        weights[: cw.overlap] = torch.linspace(1e-37, 1, cw.overlap)
    if max(window) < n - 1:
        weights[-cw.overlap :] = torch.linspace(1, 1e-37, cw.overlap)
    return weights


def step_index(sigmas: torch.Tensor, sigma: torch.Tensor) -> int:
    """The index of this evaluation's sigma in the schedule (the uniform schedules move their windows per step);
    an evaluation between the schedule's sigmas (a midpoint sampler) has none, as in ComfyUI."""
    hits = torch.nonzero(torch.isclose(sigmas, sigma.reshape(-1)[0], rtol=0.0001))
    if hits.numel() == 0:
        raise ValueError(
            "context windows: the sampler evaluated the model at a sigma that is not one of the "
            "schedule's (a midpoint sampler); context windows need a sampler that evaluates at the "
            "schedule's sigmas"
        )
    return int(hits[0].item())


def take(t: torch.Tensor, window: list[int], dim: int) -> torch.Tensor:
    return t[(slice(None),) * dim + (window,)]


def _along(weights: torch.Tensor, ndim: int, dim: int) -> torch.Tensor:
    return weights.reshape([1] * dim + [-1] + [1] * (ndim - dim - 1))


def blend(
    cw: ContextWindows,
    x: torch.Tensor,
    step: int,
    evaluate: Callable[[list[int]], list[torch.Tensor | None]],
    sides: int,
) -> list[torch.Tensor | None]:
    """Each side's prediction over the whole latent from its windows' predictions (evaluate(window) gives one per
    side, None for a side not evaluated): a weighted mean per frame, or for "relative" a running mean weighted by
    each frame's nearness to its window's centre."""
    n = x.shape[cw.dim]
    shape = [1] * cw.dim + [n] + [1] * (x.dim() - cw.dim - 1)
    finals = [torch.zeros_like(x) for _ in range(sides)]
    counts = [(torch.ones if cw.fuse == "relative" else torch.zeros)(shape, device=x.device) for _ in range(sides)]
    biases = [[0.0] * n for _ in range(sides)]
    evaluated = [False] * sides
    for window in windows(cw, n, step):
        outs = evaluate(window)
        for i, out in enumerate(outs):
            if out is None:
                continue
            evaluated[i] = True
            if cw.fuse == "relative":
                _relative(cw, finals[i], out, window, biases[i])
            else:
                w = _along(fuse_weights(cw, window, n).to(x.device), x.dim(), cw.dim)
                index = (slice(None),) * cw.dim + (window,)
                finals[i][index] += out * w
                counts[i][index] += w
    if cw.fuse != "relative":
        for i in range(sides):
            finals[i] /= counts[i]
    return [final if done else None for final, done in zip(finals, evaluated)]


def _relative(cw: ContextWindows, final: torch.Tensor, out: torch.Tensor, window: list[int], bias: list[float]) -> None:
    centre, half = (window[0] + window[-1]) / 2, (window[-1] - window[0] + 1e-2) / 2
    for pos, frame in enumerate(window):
        b = max(1e-2, 1 - abs(frame - centre) / half)
        total = bias[frame]
        at = (slice(None),) * cw.dim + (frame,)
        final[at] = final[at] * (total / (total + b)) + out[(slice(None),) * cw.dim + (pos,)] * (b / (total + b))
        bias[frame] = total + b


def freenoise(noise: torch.Tensor, cw: ContextWindows, seed: int) -> torch.Tensor:
    """FreeNoise: past the first window, each window's new frames take the noise of the frames `length` earlier in a
    seeded random order, so overlapping windows start from related noise. Returns a shuffled copy."""
    noise = noise.clone()
    generator = torch.Generator(device="cpu").manual_seed(seed)
    n, delta = noise.shape[cw.dim], cw.length - cw.overlap
    for start in range(0, n - cw.length, delta):
        place = start + cw.length
        count = min(delta, n - place)
        if count <= 0:
            break
        source = torch.randperm(count, generator=generator, device="cpu") + start
        target = (slice(None),) * cw.dim + (slice(place, place + count),)
        noise[target] = noise[(slice(None),) * cw.dim + (source,)]
    return noise
