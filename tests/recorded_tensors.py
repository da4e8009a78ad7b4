"""Tensors and images recorded in the ComfyUI fixtures (scripts/comfyui_recording.py's b64 and png_rgb: float32 or
uint8 bytes in base64 with the full shape). A large output is recorded at a strided grid of its positions
("stride"): compare ours there, `at_recorded(ours, entry)` against `tensor(entry)` or `pixels(entry)`. A fixture file
is read with `load_json(path)`: the recorders write `<name>.json.xz` (scripts/comfyui_recording.py's write_json), and the
one function that reads it is theirs."""

from __future__ import annotations

import base64
from typing import TypeVar

import numpy as np
import torch

from scripts.comfyui_recording import load_json as load_json  # re-exported: the tests' reader

Array = TypeVar("Array", torch.Tensor, np.ndarray)


def _shape(entry: dict) -> list[int]:
    """The shape of the recorded values: the full shape, or the strided grid's."""
    strides = entry.get("stride", [1] * len(entry["shape"]))
    return [-(-n // s) for n, s in zip(entry["shape"], strides, strict=True)]


def tensor(entry: dict) -> torch.Tensor:
    """A recorded float tensor: {"f32": base64 of float32 bytes, "shape": [...], "stride"?: [...]}."""
    data = np.frombuffer(base64.b64decode(entry["f32"]), dtype=np.float32).copy()
    return torch.from_numpy(data).reshape(_shape(entry))


def pixels(entry: dict) -> np.ndarray:
    """A recorded image or frames as SaveImage writes them: {"u8": base64 of uint8 bytes, "shape", "stride"?}."""
    return np.frombuffer(base64.b64decode(entry["u8"]), dtype=np.uint8).reshape(_shape(entry))


def at_recorded(ours: Array, entry: dict) -> Array:
    """Ours at the positions the entry recorded (all of them unless it is thinned), after checking that ours has
    the full shape it recorded."""
    assert list(ours.shape) == list(entry["shape"]), f"shape {list(ours.shape)}, recorded {entry['shape']}"
    if "stride" not in entry:
        return ours
    return ours[tuple(slice(None, None, s) for s in entry["stride"])]
