"""The recorded fixtures under tests/packs/fixtures (numbers from ComfyUI 0.3.64, written by the
scripts/record_comfyui_*.py scripts) and the inputs they were recorded on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from tests.recorded_tensors import tensor

__all__ = ["FIXTURES", "load", "ramp", "tensor"]

FIXTURES = Path(__file__).parent / "fixtures"


def load(name: str) -> dict:
    """The JSON fixture tests/packs/fixtures/<name>."""
    return json.loads((FIXTURES / name).read_text())


def ramp(*shape: int, scale: float = 0.37, shift: float = 0.0) -> torch.Tensor:
    """The deterministic input sin(i * scale + shift), i = 0, 1, ..., in `shape`."""
    n = int(np.prod(shape))
    return torch.sin(torch.arange(n, dtype=torch.float32) * scale + shift).reshape(shape)
