"""ComfyUI's comfy_extras.nodes_hypertile: HyperTile. The self-attention queries of the UNet's highest-resolution
layers (down to `max_depth` levels) are split into spatial tiles, so each tile's queries are attended as a
separate batch item, and the output is put back together. An attn1 patch and an attn1 output patch carried on
the MODEL (nodes.modelfns.network_patches).

The tile count along an axis is drawn among the `swap_size` largest ones that give tiles at least
`tile_size / 8` latent pixels wide. ComfyUI draws from torch's global generator; a step here draws from a
generator seeded by the step's sigma and the layer's token count, so a step gives the same image wherever it
runs (with `swap_size` 1 there is no draw and the tiling is ComfyUI's exactly)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_model
from nodes.modelfns.network_patches import with_network_patch

MODULE = "comfy_extras.nodes_hypertile"
STASH = "hypertile"  # the options key through which the output patch learns the input patch's tiling


def step_generator(options: dict, tokens: int) -> torch.Generator:
    """A generator for a patch's draws that depends only on the step (its sigma) and the layer."""
    sigma = float(options["sigmas"][0]) if "sigmas" in options else 0.0
    return torch.Generator().manual_seed(int(sigma * 1e6) * 1009 + tokens)


def tile_count(size: int, min_tile: int, options_count: int, generator: torch.Generator) -> int:
    """How many tiles to cut `size` into: among the divisors d >= min_tile of size (smallest first), the
    first `options_count` give size // d tiles; one is drawn as ComfyUI draws it (randint(0, n - 1), so the
    last candidate is never picked)."""
    min_tile = min(min_tile, size)
    counts = [size // d for d in range(min_tile, size + 1) if size % d == 0][:options_count]
    if len(counts) > 1:
        return counts[int(torch.randint(0, len(counts) - 1, (1,), generator=generator))]
    return counts[0]


@dataclass(frozen=True)
class HyperTileIn:
    """attn1_patch: tile the queries of the layers whose token count is the latent's at depth <= max_depth."""

    tile_size: int
    swap_size: int
    max_depth: int
    scale_depth: bool

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, options: dict) -> tuple:
        tokens = q.shape[-2]
        shape = options["original_shape"]
        sizes = [(shape[-2] / 2**i) * (shape[-1] / 2**i) for i in range(self.max_depth + 1)]
        if tokens not in sizes:
            return q, k, v
        aspect = shape[-1] / shape[-2]
        h, w = round(math.sqrt(tokens * aspect)), round(math.sqrt(tokens / aspect))
        factor = 2 ** sizes.index(tokens) if self.scale_depth else 1
        min_tile = max(32, self.tile_size) // 8 * factor
        generator = step_generator(options, tokens)
        nh = tile_count(h, min_tile, self.swap_size, generator)
        nw = tile_count(w, min_tile, self.swap_size, generator)
        if nh * nw > 1:
            b, _, c = q.shape
            q = q.reshape(b, nh, h // nh, nw, w // nw, c).permute(0, 1, 3, 2, 4, 5)
            q = q.reshape(b * nh * nw, (h // nh) * (w // nw), c)
            options[STASH] = (nh, nw, h, w)
        return q, k, v


@dataclass(frozen=True)
class HyperTileOut:
    """attn1_output_patch: put the tiles of the attention output back in raster order."""

    def __call__(self, out: torch.Tensor, options: dict) -> torch.Tensor:
        tiling = options.pop(STASH, None)
        if tiling is None:
            return out
        nh, nw, h, w = tiling
        c = out.shape[-1]
        out = out.reshape(-1, nh, nw, h // nh, w // nw, c).permute(0, 1, 3, 2, 4, 5)
        return out.reshape(-1, h * w, c)


class HyperTile:
    RELATIVE_PYTHON_MODULE = MODULE
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "patch"
    CATEGORY = "model_patches/unet"
    DESCRIPTION = (
        "HyperTile: computes the UNet's high-resolution self-attention in spatial tiles, which speeds up large images."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": ("MODEL", {}),
                "tile_size": ("INT", {"default": 256, "min": 1, "max": 2048, "tooltip": "Tile size in pixels."}),
                "swap_size": (
                    "INT",
                    {"default": 2, "min": 1, "max": 128, "tooltip": "How many tile counts to choose among at random."},
                ),
                "max_depth": (
                    "INT",
                    {
                        "default": 0,
                        "min": 0,
                        "max": 10,
                        "tooltip": "How many resolution levels below the top to tile as well.",
                    },
                ),
                "scale_depth": ("BOOLEAN", {"default": False, "tooltip": "Larger tiles at deeper levels."}),
            }
        }

    def patch(self, model: Any, tile_size: int, swap_size: int, max_depth: int, scale_depth: bool) -> tuple[ModelRef]:
        require_model(model)
        tile_in = HyperTileIn(int(tile_size), int(swap_size), int(max_depth), bool(scale_depth))
        model = with_network_patch(model, "attn1_patch", tile_in)
        return (with_network_patch(model, "attn1_output_patch", HyperTileOut()),)


NODE_CLASS_MAPPINGS = {"HyperTile": HyperTile}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
