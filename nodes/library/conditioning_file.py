"""ComfyUI's comfy_extras.nodes_cond file nodes: Save Conditioning writes one conditioning entry to the output
folder as safetensors (so a later run can skip the text encoder), Load Conditioning reads such a file (or any
safetensors / torch file with a `conditioning` tensor) from the embeddings folder.

File layout, as today's ComfyUI writes it: the embeddings under `conditioning`; every tensor option under its
name; a list of tensors as `name.0`, `name.1`, ...; the scalar options (bool, int, float, str) as JSON in the
`conditioning_options` metadata entry. Options of any other kind (a ControlNet, a hook) cannot be saved.
"""

from __future__ import annotations

import json
import os
from typing import Any

import torch

from nodes import output_claims
from nodes.image_io import save_image_path
from nodes.loaders import model_file, model_files
from nodes.workspace import active

META_KEY = "conditioning_options"


def _file_entries(conditioning: list) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """(tensors, scalar options) of a one-entry conditioning, in the file's layout."""
    if not isinstance(conditioning, list) or len(conditioning) != 1:
        count = len(conditioning) if isinstance(conditioning, list) else type(conditioning).__name__
        raise ValueError(
            f"Save Conditioning: takes a conditioning of one entry (got {count}); save each "
            "conditioning before combining them"
        )
    cond, options = conditioning[0]
    tensors: dict[str, torch.Tensor] = {"conditioning": cond}
    values: dict[str, Any] = {}
    for key, value in options.items():
        if isinstance(value, torch.Tensor):
            tensors[key] = value
        elif isinstance(value, (list, tuple)) and all(isinstance(t, torch.Tensor) for t in value):
            tensors.update({f"{key}.{i}": t for i, t in enumerate(value)})
        elif isinstance(value, (bool, int, float, str)):
            values[key] = value
        elif value is not None:
            raise ValueError(
                f"Save Conditioning: the conditioning option {key!r} ({type(value).__name__}) cannot be saved to a file"
            )
    return tensors, values


class SaveConditioning:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_cond"
    FUNCTION = "execute"
    CATEGORY = "model/conditioning"
    OUTPUT_NODE = True
    RETURN_TYPES = ()
    OUTPUT_TOOLTIPS = ()
    SEARCH_ALIASES = ("export conditioning", "cache text encoder output")
    DESCRIPTION = (
        "Saves a conditioning to the output folder as safetensors; move the file to the embeddings "
        "folder to load it with Load Conditioning instead of running the text encoder."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "conditioning": ("CONDITIONING", {}),
                "filename_prefix": ("STRING", {"default": "conditioning/ComfyUI", "multiline": False}),
            },
            "hidden": {"prompt": ("PROMPT",), "extra_pnginfo": ("EXTRA_PNGINFO",)},
        }

    def execute(self, conditioning: list, filename_prefix: str, **hidden: Any):
        from safetensors.torch import save_file

        tensors, values = _file_entries(conditioning)
        folder, stem, counter, _, _ = save_image_path(filename_prefix, active().output_dir, 1, 1)
        # a re-run after the head was killed writes over the name the dead run took (as the image savers)
        taken = output_claims.claim(folder, stem, counter, 1)
        path = os.path.join(taken.folder, f"{taken.stem}_{taken.counter:05}_.safetensors")
        save_file(
            {k: v.detach().to("cpu", copy=True).contiguous() for k, v in tensors.items()},
            path,
            metadata={META_KEY: json.dumps(values)},
        )
        return {"ui": {}, "result": ()}


def read_conditioning(path: str) -> list:
    """The one-entry conditioning stored in a file in Save Conditioning's layout."""
    metadata: dict[str, str] = {}
    if path.endswith(".safetensors"):
        from safetensors import safe_open

        with safe_open(path, framework="pt") as f:
            metadata = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not iterable)
    else:
        tensors = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(tensors, dict):
            raise ValueError(f"conditioning_name: {os.path.basename(path)} holds no named tensors")
    if "conditioning" not in tensors:
        raise ValueError(
            f"conditioning_name: {os.path.basename(path)} has no 'conditioning' tensor (it is not "
            "a file written by Save Conditioning)"
        )
    cond = tensors.pop("conditioning")
    try:
        options = json.loads(metadata.get(META_KEY, "{}"))
    except json.JSONDecodeError as ex:
        raise ValueError(f"conditioning_name: the {META_KEY} metadata of {os.path.basename(path)} is not JSON") from ex
    lists: dict[str, dict[int, torch.Tensor]] = {}
    for key, value in tensors.items():
        name, _, index = key.rpartition(".")
        if name and index.isdigit():
            lists.setdefault(name, {})[int(index)] = value
        else:
            options[key] = value
    options.update({name: [items[i] for i in sorted(items)] for name, items in lists.items()})
    return [[cond, options]]


class ConditioningLoader:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_cond"
    FUNCTION = "execute"
    CATEGORY = "model/loaders"
    RETURN_TYPES = ("CONDITIONING",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = (
        "Loads a conditioning saved with Save Conditioning, or any safetensors file with a "
        "'conditioning' tensor, from the embeddings folder."
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"conditioning_name": ("COMBO", {"multiselect": False, "options": model_files("embeddings")})}
        }

    def execute(self, conditioning_name: str):
        return (read_conditioning(str(model_file("embeddings", conditioning_name, "conditioning_name"))),)


NODE_CLASS_MAPPINGS = {"SaveConditioning": SaveConditioning, "ConditioningLoader": ConditioningLoader}
NODE_DISPLAY_NAME_MAPPINGS = {"SaveConditioning": "Save Conditioning", "ConditioningLoader": "Load Conditioning"}
