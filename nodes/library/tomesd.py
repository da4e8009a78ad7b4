"""ComfyUI's comfy_extras.nodes_tomesd: token merging (ToMe for Stable Diffusion). In the UNet's full-resolution
self-attention layers, a `ratio` of the query tokens is merged into their most similar "destination" tokens
(one destination per 2x2 cell) before attention and copied back out afterwards. An attn1 patch and an attn1
output patch carried on the MODEL (nodes.modelfns.network_patches).

Each cell's destination is drawn at random. ComfyUI draws from torch's global generator; a step here draws
from a generator seeded by its sigma and the layer (nodes.library.hypertile.step_generator), so a step gives
the same image wherever it runs. Given the same draws, the merge is ComfyUI's exactly."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_model
from nodes.library.hypertile import step_generator
from nodes.modelfns.network_patches import with_network_patch

MODULE = "comfy_extras.nodes_tomesd"
STASH = "tome_unmerge"
Merge = Callable[[torch.Tensor], torch.Tensor]


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


def bipartite_merge(
    metric: torch.Tensor, w: int, h: int, sx: int, sy: int, r: int, generator: torch.Generator
) -> tuple[Merge, Merge]:
    """(merge, unmerge) for tokens [B, N, C] laid out h x w: destinations are one random token per sx x sy
    cell; the r source tokens most similar (cosine) to some destination are averaged into it."""
    b, n, _ = metric.shape
    if r <= 0 or w == 1 or h == 1:
        return _identity, _identity
    cells_h, cells_w = h // sy, w // sx
    pick = torch.randint(sy * sx, size=(cells_h, cells_w, 1), generator=generator).to(metric.device)
    marks = torch.zeros(cells_h, cells_w, sy * sx, device=metric.device, dtype=torch.int64)
    marks.scatter_(dim=2, index=pick, src=-torch.ones_like(pick))  # -1: the cell's destination
    marks = marks.view(cells_h, cells_w, sy, sx).transpose(1, 2).reshape(cells_h * sy, cells_w * sx)
    if marks.shape != (h, w):  # rows / columns past the last whole cell stay sources
        full = torch.zeros(h, w, device=metric.device, dtype=torch.int64)
        full[: cells_h * sy, : cells_w * sx] = marks
        marks = full
    order = marks.reshape(1, -1, 1).argsort(dim=1)  # destinations first
    n_dst = cells_h * cells_w
    src_pos, dst_pos = order[:, n_dst:, :], order[:, :n_dst, :]

    def split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = x.shape[-1]
        return (
            torch.gather(x, 1, src_pos.expand(x.shape[0], n - n_dst, c)),
            torch.gather(x, 1, dst_pos.expand(x.shape[0], n_dst, c)),
        )

    with torch.no_grad():
        src, dst = split(metric / metric.norm(dim=-1, keepdim=True))
        r = min(src.shape[1], r)
        best, best_dst = (src @ dst.transpose(-1, -2)).max(dim=-1)
        ranked = best.argsort(dim=-1, descending=True)[..., None]
        kept, moved = ranked[..., r:, :], ranked[..., :r, :]
        moved_to = torch.gather(best_dst[..., None], -2, moved)

    def merge(x: torch.Tensor) -> torch.Tensor:
        src, dst = split(x)
        bx, n_src, c = src.shape
        stay = torch.gather(src, -2, kept.expand(bx, n_src - r, c))
        go = torch.gather(src, -2, moved.expand(bx, r, c))
        dst = dst.scatter_reduce(-2, moved_to.expand(bx, r, c), go, reduce="mean")
        return torch.cat([stay, dst], dim=1)

    def unmerge(x: torch.Tensor) -> torch.Tensor:
        n_kept = kept.shape[1]
        stay, dst = x[..., :n_kept, :], x[..., n_kept:, :]
        c = stay.shape[-1]
        back = torch.gather(dst, -2, moved_to.expand(b, r, c))
        src_all = src_pos.expand(b, src_pos.shape[1], 1)
        out = torch.zeros(b, n, c, device=x.device, dtype=x.dtype)
        out.scatter_(dim=-2, index=dst_pos.expand(b, n_dst, c), src=dst)
        out.scatter_(dim=-2, index=torch.gather(src_all, 1, kept).expand(b, n_kept, c), src=stay)
        out.scatter_(dim=-2, index=torch.gather(src_all, 1, moved).expand(b, r, c), src=back)
        return out

    return merge, unmerge


def tome_functions(
    x: torch.Tensor, ratio: float, original_shape: list[int], generator: torch.Generator
) -> tuple[Merge, Merge]:
    """Merge only in layers at the latent's full resolution (2x2 cells, ratio of the tokens)."""
    _, _, height, width = original_shape
    downsample = int(math.ceil(math.sqrt((height * width) // x.shape[1])))
    if downsample > 1:
        return _identity, _identity
    w, h = int(math.ceil(width / downsample)), int(math.ceil(height / downsample))
    return bipartite_merge(x, w, h, 2, 2, int(x.shape[1] * ratio), generator)


@dataclass(frozen=True)
class TomeMerge:
    """attn1_patch: merge the query tokens (keys and values keep every token)."""

    ratio: float

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, options: dict) -> tuple:
        merge, unmerge = tome_functions(q, self.ratio, options["original_shape"], step_generator(options, q.shape[1]))
        options[STASH] = unmerge
        return merge(q), k, v


@dataclass(frozen=True)
class TomeUnmerge:
    """attn1_output_patch: copy each merged token's output back to the tokens merged into it."""

    def __call__(self, out: torch.Tensor, options: dict) -> torch.Tensor:
        return options.pop(STASH, _identity)(out)


class TomePatchModel:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "model_patches/unet"
    DESCRIPTION = (
        "Token merging: merges similar tokens in the UNet's full-resolution self-attention, trading a "
        "little detail for speed."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "ratio": (
                    "FLOAT",
                    {
                        "default": 0.3,
                        "min": 0.0,
                        "max": 1.0,
                        "step": 0.01,
                        "tooltip": "Share of the tokens merged away.",
                    },
                ),
            }
        }

    def patch(self, model: Any, ratio: float) -> tuple[ModelRef]:
        require_model(model)
        model = with_network_patch(model, "attn1_patch", TomeMerge(float(ratio)))
        return (with_network_patch(model, "attn1_output_patch", TomeUnmerge()),)


NODE_CLASS_MAPPINGS = {"TomePatchModel": TomePatchModel}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
