"""The value types of `comfy_api` (Input.*, InputImpl.*, Types.*): tensors and dicts as the engine passes
them, the VIDEO classes of nodes.media.video, and the 3D containers."""

from __future__ import annotations

from typing import Optional, TypedDict

import torch

from nodes.media.video import (  # noqa: F401
    VideoCodec,
    VideoComponents,
    VideoContainer,
    VideoFromComponents,
    VideoFromFile,
    VideoInput,
)

ImageInput = torch.Tensor  # [B, H, W, C], 0..1
MaskInput = torch.Tensor  # [B, H, W], 0..1


class AudioInput(TypedDict):
    waveform: torch.Tensor  # [B, C, T]
    sample_rate: int


class LatentInput(TypedDict):
    samples: torch.Tensor
    noise_mask: torch.Tensor | None
    batch_index: list[int] | None


class VOXEL:
    """A voxel grid (a tensor of occupancies)."""

    def __init__(self, data: torch.Tensor):
        self.data = data


class MESH:
    """A triangle mesh: vertices [B, V, 3] and faces [B, F, 3]."""

    def __init__(self, vertices: torch.Tensor, faces: torch.Tensor):
        self.vertices, self.faces = vertices, faces
