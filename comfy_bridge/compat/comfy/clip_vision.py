"""`comfy.clip_vision`: loading a CLIP vision file (a CLIP_VISION, as our CLIPVisionLoader returns: the
encoder runs on the executors) and ComfyUI's image preprocessing, which is our encoder's own
(nodes.models.clip_vision.preprocess)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from cluster.refs import ModelRef
from comfy_bridge.packs.origin import UnsupportedFeature
from nodes.library.clip_vision import COMPONENT, clip_vision_file
from nodes.library.clip_vision import ClipVisionOutput as Output
from nodes.loaders import make_ref
from nodes.models.clip_vision import MEAN, STD, preprocess

log = logging.getLogger(__name__)


def clip_preprocess(
    image: torch.Tensor, size: int = 224, mean: Sequence[float] = MEAN, std: Sequence[float] = STD, crop: bool = True
) -> torch.Tensor:
    """IMAGE [B,H,W,C] -> [B,3,size,size]: resize (short side, then center crop; or squash), 8-bit levels,
    normalised by `mean` / `std`."""
    return preprocess(image, size, crop, tuple(mean), tuple(std))


def load(ckpt_path: str) -> ModelRef:
    """A CLIP_VISION for the file, as CLIPVisionLoader gives (CLIPVisionEncode encodes with it)."""
    path = Path(ckpt_path)
    clip_vision_file(path, "ckpt_path")
    return make_ref(COMPONENT, "clip_vision", [path])


class _IsClipVision(type):
    # A CLIP_VISION value here is a ModelRef to the weights, not ComfyUI's object: isinstance answers for it.
    def __instancecheck__(cls, obj: Any) -> bool:
        return (isinstance(obj, ModelRef) and obj.component == COMPONENT) or super().__instancecheck__(obj)


class ClipVisionModel(metaclass=_IsClipVision):
    """ComfyUI's CLIP vision model class: isinstance() is true for the CLIP_VISION values of this backend
    (comfy.clip_vision.load, CLIPVisionLoader); building one from a config raises UnsupportedFeature, as
    the model runs on the executors."""

    def __init__(self, json_config: Any = None, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedFeature(
            "comfy.clip_vision.ClipVisionModel(json_config)",
            "CLIP vision models load from files on the executors: use comfy.clip_vision.load or CLIPVisionLoader",
        )


def load_clipvision_from_sd(sd: dict[str, torch.Tensor], prefix: str = "", convert_keys: bool = False) -> Any:
    """A CLIP_VISION of a state dict, or None when it holds no CLIP vision tower this backend runs (ComfyUI: no
    config matches). With convert_keys the tower is read from under `prefix` (an OpenCLIP `visual` tower, as
    unCLIP checkpoints hold it, or transformers' names). The dict becomes a file the executors load
    (comfy.state_dict_files)."""
    from comfy_bridge.compat.comfy.state_dict_files import state_dict_file

    if convert_keys:
        inner = {k[len(prefix) :]: v for k, v in sd.items() if k.startswith(prefix)}
        if "transformer.resblocks.0.attn.in_proj_weight" in inner:  # OpenCLIP's visual tower
            sd = {f"visual.{k}": v for k, v in inner.items()}
        else:
            sd = {**{k: v for k, v in sd.items() if not k.startswith(prefix)}, **inner}
    path = state_dict_file(sd, "comfy.clip_vision.load_clipvision_from_sd")
    try:
        return load(str(path))
    except ValueError as e:
        log.warning("comfy.clip_vision.load_clipvision_from_sd: %s", e)
        return None


__all__ = ["Output", "ClipVisionModel", "clip_preprocess", "load", "load_clipvision_from_sd"]
