"""`comfy.k_diffusion.utils`: k-diffusion's small helpers packs import (append_dims, n_params, FolderOfImages)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image
from torch import nn
from torch.utils import data

from nodes.sampling.sampler_base import append_dims

__all__ = ["append_dims", "n_params", "FolderOfImages"]


def n_params(module: nn.Module) -> int:
    """The number of parameters of a module."""
    return sum(p.numel() for p in module.parameters())


class FolderOfImages(data.Dataset):
    """Every image under `root` (recursively, by extension, sorted by path) as a one-element tuple of the RGB PIL
    image passed through `transform` (identity by default). No classes or targets."""

    IMG_EXTENSIONS = {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"}

    def __init__(self, root: Any, transform: Callable | None = None):
        super().__init__()
        self.root = Path(root)
        self.transform = nn.Identity() if transform is None else transform
        self.paths = sorted(p for p in self.root.rglob("*") if p.suffix.lower() in self.IMG_EXTENSIONS)

    def __repr__(self) -> str:
        return f'FolderOfImages(root="{self.root}", len: {len(self)})'

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, key: int) -> tuple:
        with open(self.paths[key], "rb") as f:
            image = Image.open(f).convert("RGB")
        return (self.transform(image),)
