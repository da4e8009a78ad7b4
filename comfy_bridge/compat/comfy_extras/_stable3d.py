"""`comfy_extras.nodes_stable3d.camera_embeddings`: the Zero123 camera vector packs append to a CLIP
vision embedding."""

from __future__ import annotations

from typing import Any

import torch


def camera_embeddings(elevation: Any, azimuth: Any) -> torch.Tensor:
    """[n, 1, 4]: (polar angle offset, sin azimuth, cos azimuth, 90 degrees), angles in radians. Zero123's
    polar angle is 90 - elevation, given here relative to the horizon (so -elevation)."""
    elevation = torch.as_tensor([elevation])
    azimuth = torch.as_tensor([azimuth])
    az = torch.deg2rad(azimuth)
    polar = torch.deg2rad((90 - elevation) - 90)
    right = torch.deg2rad(90 - torch.zeros_like(elevation))
    return torch.stack([polar, torch.sin(az), torch.cos(az), right], dim=-1).unsqueeze(1)
