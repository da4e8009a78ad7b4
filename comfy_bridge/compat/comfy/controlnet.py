"""`comfy.controlnet`: ControlNet loading and the batch helper packs import.

`load_controlnet(path)` gives the same CONTROL_NET value the core ControlNetLoader gives (a reference to
the file that the executors load), so a pack's loader output feeds the core apply nodes. The ControlNet
objects of ComfyUI (ControlBase and its subclasses, which run the control model in the pack's process)
exist for isinstance checks and subclassing; constructing one raises UnsupportedFeature. CONTROL_NET
values here are never instances of them. `broadcast_image_to` is ComfyUI's batch broadcast, for real.
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import Any

import torch

from cluster.refs import ModelRef
from comfy_bridge.packs.origin import UnsupportedFeature
from nodes.loaders import controlnet_ref

WHY = "ControlNets run on the executors; CONTROL_NET values are file references (apply them with the core nodes)"


def broadcast_image_to(tensor: torch.Tensor, target_batch_size: int, batched_number: int) -> torch.Tensor:
    """Fit a hint batch to `target_batch_size` rows made of `batched_number` equal groups (cond, uncond...):
    a single image is returned as is; otherwise the first per-group count of images is taken (repeated
    cyclically when there are too few) and tiled once per group unless that already gives the target."""
    if tensor.shape[0] == 1:
        return tensor
    per_batch = target_batch_size // batched_number
    tensor = tensor[:per_batch]
    have = tensor.shape[0]
    if per_batch > have:
        tensor = torch.cat([tensor] * (per_batch // have) + [tensor[: per_batch % have]], dim=0)
    if tensor.shape[0] == target_batch_size:
        return tensor
    return torch.cat([tensor] * batched_number, dim=0)


class StrengthType(Enum):
    CONSTANT = 1
    LINEAR_UP = 2


class ControlBase:
    """ComfyUI's in-process control model base class (isinstance checks and subclassing only)."""

    def __init__(self, *args: Any, **kwargs: Any):
        raise UnsupportedFeature(f"comfy.controlnet.{type(self).__name__}", WHY)


class ControlNet(ControlBase):
    pass


class ControlLoraOps:
    pass


class ControlLora(ControlNet):
    pass


class ControlNetSD35(ControlNet):
    pass


class T2IAdapter(ControlBase):
    pass


def load_controlnet(ckpt_path: str | os.PathLike, model: Any = None, model_options: dict | None = None) -> ModelRef:
    """The CONTROL_NET for a ControlNet / T2I-Adapter file (the core ControlNetLoader's value)."""
    path = Path(ckpt_path)
    if not path.is_file():
        raise FileNotFoundError(f"comfy.controlnet.load_controlnet: {str(ckpt_path)!r} is not a file")
    return controlnet_ref(path, "ckpt_path")


def load_controlnet_state_dict(state_dict: dict, model: Any = None, model_options: dict | None = None) -> Any:
    raise UnsupportedFeature(
        "comfy.controlnet.load_controlnet_state_dict",
        "a ControlNet from an in-memory state dict; " + WHY + " (use load_controlnet on the file)",
    )


def load_t2i_adapter(t2i_data: dict, model_options: dict | None = None) -> Any:
    raise UnsupportedFeature(
        "comfy.controlnet.load_t2i_adapter",
        "a T2I-Adapter from an in-memory state dict; " + WHY + " (use load_controlnet on the file)",
    )
