"""VOID's flow-warped noise (the second pass's start; ComfyUI's VOIDWarpedNoise, after Burgert et al.'s
"Go-with-the-Flow" noise warping): Gaussian noise carried from frame to frame along the optical flow, so that the
noise moves with the video's content and stays unit-variance Gaussian.

The warper keeps a state of 3 + C channels at 8x the flow's resolution: a sub-pixel offset pair (always zero here),
a weight and C noise channels. Each flow step moves every state pixel two ways at once: pixels that land on a target
("shrink": several sources may meet there) are merged by weight, and targets no pixel lands on are filled from
where the flow comes from ("expand": one source may fill several). Sources used more than once are re-Gaussianised
(each copy keeps 1/sqrt(count) of the value plus fresh zero-mean noise), so the statistics hold. The noise of each
frame is then area-pooled to the latent's size and scaled back to unit variance.

Random draws come from one generator, in the order: the first state's noise, then each step's fresh noise.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

OFFSETS, WEIGHT, FIRST_NOISE = 2, 2, 3  # state channels: [dx, dy], weight, then the noise


def _resize(chw: torch.Tensor, size: tuple[int, int], mode: str) -> torch.Tensor:
    if tuple(chw.shape[-2:]) == size:
        return chw
    extra = {"align_corners": False} if mode == "bilinear" else {}
    return F.interpolate(chw[None], size=size, mode=mode, **extra)[0]


def _gather_nearest(chw: torch.Tensor, dx: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """Each pixel takes the value at (x + dx, y + dy), rounded to the nearest pixel; zero outside the image."""
    _, h, w = chw.shape
    x = (dx + torch.arange(w, dtype=dx.dtype)) / (w - 1) * 2 - 1
    y = (dy + torch.arange(h, dtype=dy.dtype)[:, None]) / (h - 1) * 2 - 1
    grid = torch.stack([x, y], dim=-1)[None].to(chw.dtype)
    return F.grid_sample(chw[None], grid, mode="nearest", align_corners=True, padding_mode="zeros")[0]


def _scatter_sum(chw: torch.Tensor, dx: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """Each pixel's value added at (x + dx, y + dy) (offsets truncated to whole pixels); outside targets dropped."""
    c, h, w = chw.shape
    x = dx.long() + torch.arange(w)
    y = dy.long() + torch.arange(h)[:, None]
    inside = ((x >= 0) & (x < w) & (y >= 0) & (y < h)).reshape(-1)
    target = (y * w + x).reshape(-1)[inside]
    values = chw.reshape(c, -1).t()[inside]
    out = torch.zeros(h * w, c, dtype=chw.dtype)
    out.index_add_(0, target, values)
    return out.t().reshape(c, h, w)


def _regaussianize(noise: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixels sharing one value (copies of one source, told apart by the first channel) keep 1/sqrt(count) of it
    plus fresh noise whose mean over the group is zero. Returns (noise, per-pixel copy count [1, H, W])."""
    c, h, w = noise.shape
    # one value per pixel: a plain unique over the values groups them as a row-wise one would, much faster
    _, group, count = torch.unique(noise[0].reshape(-1), return_inverse=True, return_counts=True)
    fresh = torch.randn(noise.shape, dtype=noise.dtype, generator=gen)
    # per group sums in pixel order, channels kept contiguous (the same additions in the same order as per row)
    sums = torch.zeros(c, int(group.max()) + 1, dtype=noise.dtype)
    sums.index_add_(1, group, fresh.reshape(c, -1))
    means = (sums / count.to(noise.dtype)).index_select(1, group).reshape(c, h, w)
    copies = count.to(noise.dtype)[group].reshape(1, h, w)
    return noise / copies**0.5 + (fresh - means), copies


def warp_state(state: torch.Tensor, flow: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """One step of the warper's state [3 + C, H, W] along `flow` [2, H, W] (pixels, x then y)."""
    _, h, w = state.shape
    blank = torch.zeros_like(state)
    blank[WEIGHT] = 1
    # expand: each target reads the state where its flow comes from
    expand = torch.empty_like(state)
    expand[:OFFSETS] = _gather_nearest(state[:OFFSETS], -flow[0], -flow[1])
    expand[OFFSETS:] = _gather_nearest(state[OFFSETS:], -flow[0], -flow[1])
    expand[WEIGHT][expand[WEIGHT] == 0] = 1
    # shrink: each source moves to where its flow goes; sources leaving the image start blank
    shrink = state.clone()
    shrink[:OFFSETS] += flow
    ys, xs = torch.meshgrid(torch.arange(h, dtype=state.dtype), torch.arange(w, dtype=state.dtype), indexing="ij")
    tx, ty = (xs + shrink[0]).round(), (ys + shrink[1]).round()
    inside = (tx >= 0) & (tx < w) & (ty >= 0) & (ty < h)
    shrink = torch.where(inside[None], shrink, blank)
    move = shrink[:OFFSETS].round()
    shrink[:OFFSETS] = 0  # the sub-pixel remainder is not kept (ComfyUI's mode)
    landed = _scatter_sum(torch.ones(1, h, w, dtype=state.dtype), move[0], move[1]) > 0
    expand = torch.where(landed, blank, expand)
    # both halves re-Gaussianised together, so a source used by both counts all its copies
    both = torch.cat([shrink, expand], dim=2)
    both[FIRST_NOISE:], copies = _regaussianize(both[FIRST_NOISE:], gen)
    both[WEIGHT] = (both[WEIGHT] / copies[0]).nan_to_num()
    shrink, expand = both.chunk(2, dim=2)
    weight = shrink[WEIGHT][None]
    merged = torch.empty_like(shrink)
    merged[WEIGHT] = _scatter_sum(weight, move[0], move[1])[0]
    merged[:OFFSETS] = _scatter_sum(shrink[:OFFSETS] * weight, move[0], move[1]) / merged[WEIGHT][None]
    norm = _scatter_sum(weight**2, move[0], move[1]).sqrt()
    merged[FIRST_NOISE:] = _scatter_sum(shrink[FIRST_NOISE:] * weight, move[0], move[1]) / norm
    out = torch.where(landed, merged, expand)
    out[WEIGHT] = out[WEIGHT] / out[WEIGHT].mean()
    out[WEIGHT] += 1e-5
    out[WEIGHT] **= 0.9999
    return out


def state_noise(state: torch.Tensor) -> torch.Tensor:
    weight = state[WEIGHT : WEIGHT + 1]
    return state[FIRST_NOISE:] * weight / (weight**2).sqrt()


def warped_noise(
    frames: torch.Tensor,
    flow_between,
    gen: torch.Generator,
    channels: int = 16,
    frame_scale: float = 0.5,
    flow_scale: int = 8,
    downscale: int = 32,
) -> torch.Tensor:
    """Noise [T, H', W', channels] for the uint8 video `frames` [T, H, W, 3]: the frames at `frame_scale` (area),
    the flow between each pair (`flow_between(previous, current)`, CHW in [0, 1] -> [2, h, w]) driving a state at
    `flow_scale` times their size, each frame's noise area-pooled by `downscale` and scaled back by it."""
    pictures = frames.permute(0, 3, 1, 2).float() / 255.0
    if frame_scale != 1.0:
        size = (max(1, int(pictures.shape[2] * frame_scale)), max(1, int(pictures.shape[3] * frame_scale)))
        pictures = F.interpolate(pictures, size=size, mode="area")
    h, w = flow_scale * pictures.shape[2], flow_scale * pictures.shape[3]
    noise = torch.randn(channels, h, w, generator=gen)
    state = torch.cat([torch.zeros(2, h, w), torch.ones(1, h, w), noise])
    small = (max(1, int(h / downscale)), max(1, int(w / downscale)))

    def pooled(s: torch.Tensor) -> torch.Tensor:
        return (_resize(state_noise(s), small, "area") * downscale).permute(1, 2, 0)

    out = [pooled(state)]
    for previous, current in zip(pictures[:-1], pictures[1:], strict=True):
        flow = flow_between(previous, current).float()
        fh, fw = flow.shape[-2:]
        flow = _resize(flow, (h, w), "bilinear").clone()
        flow[0] *= h / fh  # the source scales x by the height ratio and y by the width's (equal here)
        flow[1] *= w / fw
        state = warp_state(state, flow, gen)
        out.append(pooled(state))
    return torch.stack(out)
