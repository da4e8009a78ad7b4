"""In-memory state dicts as model files: ComfyUI's loaders that take a state dict (comfy.sd.
load_diffusion_model_state_dict, load_text_encoder_state_dicts, comfy.clip_vision.load_clipvision_from_sd,
comfy.hooks.load_hook_lora_for_models) build models in its process. Here models are ModelRefs to files that
the executors load, so the state dict is written once as a safetensors file named by its content's digest
(in the workspace's temp folder, `state_dicts/`), and the file loader of that kind takes it from there."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch

FOLDER = "state_dicts"


def _tensors(sd: dict[str, Any], call: str) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in sd.items():
        if type(value) is not torch.Tensor and not isinstance(value, torch.nn.Parameter):
            raise TypeError(f"{call}: state dict entry {key!r} is a {type(value).__name__}, not a plain tensor "
                            "(quantized tensors load through their pack's own operations, which need ComfyUI's "
                            "in-process model)")
        out[key] = value.detach().to("cpu").contiguous().clone()   # own storage: safetensors refuses shared ones
    return out


def state_dict_file(sd: dict[str, Any], call: str) -> Path:
    """The safetensors file holding `sd` (written when no file of that content exists yet)."""
    from safetensors.torch import save

    from comfy_bridge.compat import folder_paths
    data = save(_tensors(sd, call))
    folder = Path(folder_paths.get_temp_directory()) / FOLDER
    path = folder / f"{hashlib.sha256(data).hexdigest()[:32]}.safetensors"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_bytes(data)
        partial.replace(path)   # atomic: a reader never sees half a file
    return path
