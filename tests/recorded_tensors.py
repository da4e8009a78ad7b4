"""Tensors recorded in the ComfyUI fixtures (scripts/comfyui_recording.py's b64: float32 bytes in base64 with
the shape)."""

from __future__ import annotations

import base64

import numpy as np
import torch


def tensor(entry: dict) -> torch.Tensor:
    """A recorded tensor: {"f32": base64 of float32 bytes, "shape": [...]}."""
    data = np.frombuffer(base64.b64decode(entry["f32"]), dtype=np.float32).copy()
    return torch.from_numpy(data).reshape(entry["shape"])
