"""`comfy.ldm.util`: the small helpers of the original latent-diffusion code that packs import."""

from __future__ import annotations

import importlib
from typing import Any

import torch


def exists(x: Any) -> bool:
    return x is not None


def default(val: Any, d: Any) -> Any:
    """`val`, or `d` when val is None (`d` is called if it is a function)."""
    if exists(val):
        return val
    return d() if callable(d) else d


def ismap(x: Any) -> bool:
    """A [B, C, H, W] tensor with more than 3 channels."""
    return isinstance(x, torch.Tensor) and x.ndim == 4 and x.shape[1] > 3


def isimage(x: Any) -> bool:
    """A [B, 1|3, H, W] tensor."""
    return isinstance(x, torch.Tensor) and x.ndim == 4 and x.shape[1] in (1, 3)


def mean_flat(tensor: torch.Tensor) -> torch.Tensor:
    """Mean over every dimension but the batch."""
    return tensor.mean(dim=list(range(1, tensor.ndim)))


def count_params(model: torch.nn.Module, verbose: bool = False) -> int:
    total = sum(p.numel() for p in model.parameters())
    if verbose:
        print(f"{model.__class__.__name__} has {total * 1.0e-6:.2f} M params.")
    return total


def get_obj_from_str(string: str, reload: bool = False) -> Any:
    """The object a dotted "module.Name" string names."""
    module, cls = string.rsplit(".", 1)
    if reload:
        importlib.reload(importlib.import_module(module))
    return getattr(importlib.import_module(module, package=None), cls)


def instantiate_from_config(config: dict) -> Any:
    """`target(**params)` of a {"target": "module.Name", "params": {...}} config."""
    if "target" not in config:
        if config in ("__is_first_stage__", "__is_unconditional__"):
            return None
        raise KeyError("Expected key `target` to instantiate.")
    return get_obj_from_str(config["target"])(**config.get("params", {}))
