"""`comfy.utils`: ProgressBar, tensor file I/O and image resizing helpers node packs use."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from nodes import progress

PROGRESS_BAR_ENABLED = True
PROGRESS_BAR_HOOK: Callable | None = None


def set_progress_bar_enabled(enabled: bool) -> None:
    global PROGRESS_BAR_ENABLED
    PROGRESS_BAR_ENABLED = enabled


def set_progress_bar_global_hook(function: Callable | None) -> None:
    """A hook for code running outside any node (the engine installs per-node hooks itself)."""
    global PROGRESS_BAR_HOOK
    PROGRESS_BAR_HOOK = function


class ProgressBar:
    """Reports `value / total` of the running node (`progress` and `progress_state` messages)."""

    def __init__(self, total: float, node_id: str | None = None):
        self.total = total
        self.current = 0
        self.node_id = node_id

    def update_absolute(self, value: float, total: float | None = None, preview: Any = None) -> None:
        if total is not None:
            self.total = total
        if value > self.total:
            value = self.total
        self.current = value
        if progress._hook.get() is not None:
            progress.report_progress(self.current, self.total, preview)
        elif PROGRESS_BAR_HOOK is not None:
            PROGRESS_BAR_HOOK(self.current, self.total, preview, node_id=self.node_id)

    def update(self, value: float) -> None:
        self.update_absolute(self.current + value)


def safetensors_header(path: str, max_size: int = 100 * 1024 * 1024) -> bytes | None:
    with open(path, "rb") as f:
        length = struct.unpack("<Q", f.read(8))[0]
        if length > max_size:
            return None
        return f.read(length)


def load_torch_file(ckpt: str, safe_load: bool = False, device: Any = None, return_metadata: bool = False) -> Any:
    """A state dict from .safetensors/.sft (with metadata on request) or a torch pickle (weights only)."""
    device = device or torch.device("cpu")
    metadata = None
    if str(ckpt).lower().endswith((".safetensors", ".sft")):
        import safetensors.torch
        from safetensors import safe_open

        with safe_open(ckpt, framework="pt", device=str(device)) as f:
            sd = {k: f.get_tensor(k) for k in f.keys()}
            metadata = f.metadata() if return_metadata else None
    else:
        loaded = torch.load(ckpt, map_location=device, weights_only=True)
        sd = loaded.get("state_dict", loaded) if isinstance(loaded, dict) else loaded
    return (sd, metadata) if return_metadata else sd


def save_torch_file(sd: dict, ckpt: str, metadata: dict | None = None) -> None:
    import safetensors.torch

    from nodes.output_claims import write_atomic

    write_atomic(ckpt, lambda tmp: safetensors.torch.save_file(sd, tmp, metadata=metadata))


def state_dict_prefix_replace(state_dict: dict, replace_prefix: dict, filter_keys: bool = False) -> dict:
    out = {} if filter_keys else state_dict
    for old, new in replace_prefix.items():
        for key in [k for k in state_dict if k.startswith(old)]:
            out[new + key[len(old) :]] = state_dict.pop(key)
    return out


def set_attr(obj: Any, attr: str, value: Any) -> Any:
    *path, last = attr.split(".")
    for name in path:
        obj = getattr(obj, name)
    prev = getattr(obj, last)
    setattr(obj, last, value)
    return prev


def get_attr(obj: Any, attr: str) -> Any:
    for name in attr.split("."):
        obj = getattr(obj, name)
    return obj


def repeat_to_batch_size(tensor: torch.Tensor, batch_size: int, dim: int = 0) -> torch.Tensor:
    if tensor.shape[dim] > batch_size:
        return tensor.narrow(dim, 0, batch_size)
    if tensor.shape[dim] < batch_size:
        reps = [1] * tensor.ndim
        reps[dim] = math.ceil(batch_size / tensor.shape[dim])
        return tensor.repeat(reps).narrow(dim, 0, batch_size)
    return tensor


def resize_to_batch_size(tensor: torch.Tensor, batch_size: int) -> torch.Tensor:
    """Spread (or thin) a batch to `batch_size` items by nearest index."""
    n = tensor.shape[0]
    if n == batch_size:
        return tensor
    if batch_size <= 1:
        return tensor[:batch_size]
    idx = [min(n - 1, round(i * (n - 1) / (batch_size - 1))) for i in range(batch_size)]
    return tensor[idx]


# One resize implementation serves the core nodes and the packs (checked against ComfyUI's, bit for bit).
from nodes.upscale import bislerp, common_upscale, lanczos  # noqa: E402,F401


def get_tiled_scale_steps(width: int, height: int, tile_x: int, tile_y: int, overlap: int) -> int:
    rows = 1 if height <= tile_y else math.ceil((height - overlap) / (tile_y - overlap))
    cols = 1 if width <= tile_x else math.ceil((width - overlap) / (tile_x - overlap))
    return rows * cols


@torch.inference_mode()
def tiled_scale_multidim(
    samples: torch.Tensor,
    function: Callable,
    tile: tuple = (64, 64),
    overlap: int = 8,
    upscale_amount: float = 4,
    out_channels: int = 3,
    output_device: str = "cpu",
    downscale: bool = False,
    index_formulas: Any = None,
    pbar: ProgressBar | None = None,
) -> torch.Tensor:
    """Apply `function` tile by tile and blend the overlaps with linear feathering."""
    dims = len(tile)
    scale = upscale_amount if not isinstance(upscale_amount, (int, float)) else [upscale_amount] * dims

    def out_size(n: float, s: float) -> int:
        return round(n / s) if downscale else round(n * s)

    output = torch.empty(
        [samples.shape[0], out_channels, *(out_size(s, f) for s, f in zip(samples.shape[2:], scale))],
        device=output_device,
    )
    for b in range(samples.shape[0]):
        s = samples[b : b + 1]
        if all(s.shape[d + 2] <= tile[d] for d in range(dims)):
            output[b : b + 1] = function(s).to(output_device)
            if pbar is not None:
                pbar.update(1)
            continue
        acc = torch.zeros([1, out_channels, *output.shape[2:]], device=output_device)
        weight = torch.zeros_like(acc)
        starts = [range(0, max(1, s.shape[d + 2] - overlap), tile[d] - overlap) for d in range(dims)]
        import itertools

        for pos in itertools.product(*starts):
            piece = s
            for d in range(dims):
                start = max(0, min(s.shape[d + 2] - tile[d], pos[d]))
                piece = piece.narrow(d + 2, start, min(tile[d], s.shape[d + 2]))
            ps = function(piece).to(output_device)
            mask = torch.ones_like(ps)
            feather = out_size(overlap, scale[0])
            for d in range(dims):
                for t in range(feather):
                    a = (t + 1) / feather
                    mask.narrow(d + 2, t, 1).mul_(a)
                    mask.narrow(d + 2, mask.shape[d + 2] - 1 - t, 1).mul_(a)
            region_acc, region_w = acc, weight
            for d in range(dims):
                start = out_size(max(0, min(s.shape[d + 2] - tile[d], pos[d])), scale[d])
                region_acc = region_acc.narrow(d + 2, start, ps.shape[d + 2])
                region_w = region_w.narrow(d + 2, start, ps.shape[d + 2])
            region_acc += ps * mask
            region_w += mask
            if pbar is not None:
                pbar.update(1)
        output[b : b + 1] = acc / weight.clamp_min(1e-8)
    return output


def tiled_scale(
    samples: torch.Tensor,
    function: Callable,
    tile_x: int = 64,
    tile_y: int = 64,
    overlap: int = 8,
    upscale_amount: float = 4,
    out_channels: int = 3,
    output_device: str = "cpu",
    pbar: ProgressBar | None = None,
) -> torch.Tensor:
    return tiled_scale_multidim(
        samples,
        function,
        (tile_y, tile_x),
        overlap=overlap,
        upscale_amount=upscale_amount,
        out_channels=out_channels,
        output_device=output_device,
        pbar=pbar,
    )


def reshape_mask(input_mask: torch.Tensor, output_shape: tuple) -> torch.Tensor:
    """A mask resized to a latent/image shape [B, C, H, W] with its channel count repeated."""
    dims = len(output_shape) - 2
    mask = input_mask.reshape((-1, 1) + tuple(input_mask.shape[-dims:]))
    mode = "bilinear" if dims == 2 else ("linear" if dims == 1 else "trilinear")
    mask = F.interpolate(mask, size=tuple(output_shape[2:]), mode=mode)
    if mask.shape[1] < output_shape[1]:
        mask = mask.repeat((1, output_shape[1]) + (1,) * dims)[:, : output_shape[1]]
    return repeat_to_batch_size(mask, output_shape[0])


def copy_to_param(obj: Any, attr: str, value: torch.Tensor) -> None:
    get_attr(obj, attr).data.copy_(value)


def string_to_seed(data: str) -> int:
    import zlib

    return zlib.crc32(data.encode("utf-8"))


from comfy_bridge.compat.comfy.unet_keys import (  # noqa: E402,F401
    TRANSFORMER_BLOCKS,
    UNET_MAP_ATTENTIONS,
    UNET_MAP_BASIC,
    UNET_MAP_RESNET,
    unet_to_diffusers,
)


def calculate_parameters(sd: dict, prefix: str = "") -> int:
    """How many numbers the state dict's tensors under `prefix` hold."""
    return sum(w.nelement() for k, w in sd.items() if k.startswith(prefix))


def weight_dtype(sd: dict, prefix: str = "") -> torch.dtype | None:
    """The dtype holding most of the numbers under `prefix` (None when nothing is there)."""
    counts: dict[torch.dtype, int] = {}
    for k, w in sd.items():
        if k.startswith(prefix):
            counts[w.dtype] = counts.get(w.dtype, 0) + w.numel()
    return max(counts, key=counts.get) if counts else None


def set_attr_param(obj: Any, attr: str, value: torch.Tensor) -> Any:
    """set_attr with the value wrapped as a frozen nn.Parameter; returns the previous value."""
    return set_attr(obj, attr, torch.nn.Parameter(value, requires_grad=False))


def pack_latents(latents: list[torch.Tensor]) -> tuple[torch.Tensor, list]:
    """Several latents -> one [B, 1, N] tensor (each flattened after its batch dim, concatenated) and their shapes."""
    shapes = [t.shape for t in latents]
    return torch.cat([t.reshape(t.shape[0], 1, -1) for t in latents], dim=-1), shapes


def unpack_latents(combined: torch.Tensor, latent_shapes: list) -> list[torch.Tensor]:
    """The inverse of pack_latents (a single shape gives the combined tensor back as is)."""
    if len(latent_shapes) <= 1:
        return [combined]
    out = []
    for shape in latent_shapes:
        size = math.prod(shape[1:])
        part, combined = combined[:, :, :size], combined[:, :, size:]
        out.append(part.reshape([part.shape[0], *shape[1:]]))
    return out
