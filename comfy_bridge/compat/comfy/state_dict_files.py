"""In-memory state dicts as model files: ComfyUI's loaders that take a state dict (comfy.sd.
load_diffusion_model_state_dict, load_text_encoder_state_dicts, comfy.clip_vision.load_clipvision_from_sd,
comfy.hooks.load_hook_lora_for_models) build models in its process. Here models are ModelRefs to files that
the executors load, so the state dict is written once as a safetensors file named by its content's digest
(in the workspace's temp folder, `state_dicts/`), and the file loader of that kind takes it from there."""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from typing import Any

import torch

FOLDER = "state_dicts"
CHUNK = 1 << 24


def _tensors(sd: dict[str, Any], call: str) -> dict[str, torch.Tensor]:
    """The entries as CPU tensors safetensors can write (a tensor sharing storage with another is copied)."""
    out, seen = {}, set()
    for key, value in sd.items():
        if type(value) is not torch.Tensor and not isinstance(value, torch.nn.Parameter):
            raise TypeError(
                f"{call}: state dict entry {key!r} is a {type(value).__name__}, not a plain tensor "
                "(quantized tensors load through their pack's own operations, which need ComfyUI's "
                "in-process model)"
            )
        tensor = value.detach().to("cpu").contiguous()
        storage = tensor.untyped_storage().data_ptr()
        if storage in seen:
            tensor = tensor.clone()
        seen.add(storage)
        out[key] = tensor
    return out


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()[:32]


def state_dict_file(sd: dict[str, Any], call: str) -> Path:
    """The safetensors file holding `sd` (a file of the same content is reused)."""
    from safetensors.torch import save_file

    from comfy_bridge.compat import folder_paths

    folder = Path(folder_paths.get_temp_directory()) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f"{uuid.uuid4().hex}.partial"
    try:
        save_file(_tensors(sd, call), str(partial))
        path = folder / f"{_digest(partial)}.safetensors"
        if path.is_file():
            partial.unlink()
        else:
            os.replace(partial, path)  # atomic: a reader never sees half a file
    finally:
        partial.unlink(missing_ok=True)
    return path
