"""Frame interpolation as ComfyUI's FrameInterpolate runs it (comfy_extras/nodes_frame_interpolation.py, newest
ComfyUI): the file told apart as FILM or RIFE the way its FrameInterpolationModelLoader does, and `multiplier - 1`
frames at t = k / multiplier put between each pair of neighbouring frames, the given frames kept as they are.

Computed in float32 (ComfyUI's choice off-GPU; on a GPU it would compute in float16)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .frame_interp_film import Film, build_film, is_film
from .frame_interp_rife import Rife, build_rife, normalize_keys, rife_config

FrameModel = Film | Rife


def kind_of(sd: dict) -> str | None:
    """'film', 'rife' or None (neither), from the names and shapes of a checkpoint (tensors or shapes)."""
    if is_film(sd):
        return "film"
    try:
        rife_config(normalize_keys(sd))
    except (KeyError, ValueError):
        return None
    return "rife"


def build(sd: dict[str, torch.Tensor]) -> FrameModel:
    if is_film(sd):
        return build_film(sd)
    return build_rife(sd)


def _pad(frames: torch.Tensor, align: int) -> torch.Tensor:
    """Reflect-padded at the right and bottom to multiples of `align` (ComfyUI's pad_to_patch_size)."""
    h, w = frames.shape[-2:]
    ph, pw = (align - h % align) % align, (align - w % align) % align
    return F.pad(frames, (0, pw, 0, ph), mode="reflect") if ph or pw else frames


@torch.no_grad()
def interpolate(model: FrameModel, images: torch.Tensor, multiplier: int) -> torch.Tensor:
    """IMAGE [T, H, W, C] with `multiplier - 1` new frames between each neighbouring pair: [(T-1)*multiplier+1, H,
    W, 3] clamped to 0..1; fewer than two frames or a multiplier under 2 leave `images` untouched."""
    count = images.shape[0]
    if count < 2 or multiplier < 2:
        return images
    _, h, w, _ = images.shape
    device = next(model.parameters()).device
    timesteps = [k / multiplier for k in range(1, multiplier)]
    out = torch.empty(((count - 1) * multiplier + 1, 3, h, w), dtype=torch.float32)
    out[0] = images[0].movedim(-1, 0)[:3]

    def frame(i: int) -> torch.Tensor:
        return _pad(images[i : i + 1, ..., :3].movedim(-1, 1).to(device=device, dtype=torch.float32), model.pad_align)

    img0 = frame(0)
    f0 = model.features(img0)
    for i in range(count - 1):
        img1 = frame(i + 1)
        f1 = model.features(img1)  # the next pair's first frame: computed once
        start = i * multiplier + 1
        out[start : start + multiplier - 1] = model.middle(img0, img1, f0, f1, timesteps)[:, :, :h, :w].cpu()
        out[start + multiplier - 1] = images[i + 1].movedim(-1, 0)[:3]
        img0, f0 = img1, f1
    return out.movedim(1, -1).clamp_(0.0, 1.0)
