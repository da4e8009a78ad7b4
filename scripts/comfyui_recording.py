"""What the scripts/record_comfyui_*.py recorders share: they run inside a ComfyUI's own environment at development
time (nothing of ComfyUI is committed) and import this module by name, as a script's own folder is on sys.path.
Only the standard library and torch/numpy are imported at module level: ComfyUI's modules must be imported after
`comfyui_on_cpu`."""

from __future__ import annotations

import base64
import hashlib
import sys
from collections.abc import Callable
from types import ModuleType

import numpy as np
import torch


def comfyui_on_cpu(*before: str, flags: tuple[str, ...] = ()) -> None:
    """Set the command line ComfyUI would see (`before`, then --cpu and `flags`) and its parsed cpu flag: ComfyUI
    parses no command line on import unless asked, so the flag is also set on its args (no CUDA here)."""
    sys.argv[1:] = [*before, "--cpu", *flags]
    import comfy.cli_args

    comfy.cli_args.args.cpu = True


def b64(t: torch.Tensor) -> dict:
    """A tensor as the fixtures store it: float32 bytes in base64 with the shape (tests/recorded_tensors.py reads it)."""
    t = t.detach().to(torch.float32).contiguous().cpu()
    return {"shape": list(t.shape), "f32": base64.b64encode(t.numpy().tobytes()).decode()}


def sha256(path: str) -> str:
    """A file's SHA-256, recorded so that a test knows which tiny file the numbers came from."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def png_rgb(image: torch.Tensor) -> dict:
    """What SaveImage writes for one image (255 * image, clipped, truncated to uint8) as {"shape", "u8"}."""
    png = np.clip(255.0 * image.detach().cpu().numpy(), 0, 255).astype(np.uint8)
    return {"shape": list(png.shape), "u8": base64.b64encode(png.tobytes()).decode()}


def node_classes(*modules: ModuleType) -> dict:
    """ComfyUI's node classes by class_type: nodes.py's and those of `modules` (v1 mappings and v3 io.ComfyNode
    classes, which register by their schema's node_id)."""
    import nodes

    classes = dict(nodes.NODE_CLASS_MAPPINGS)
    for module in modules:
        classes.update(getattr(module, "NODE_CLASS_MAPPINGS", {}))
        for cls in vars(module).values():
            if isinstance(cls, type) and cls.__module__ == module.__name__ and hasattr(cls, "define_schema"):
                classes[cls.define_schema().node_id] = cls
    return classes


def run_node(cls: type, inputs: dict) -> tuple:
    """One node's outputs, for a v1 class (FUNCTION) or a v3 one (execute)."""
    if hasattr(cls, "FUNCTION"):
        return getattr(cls(), cls.FUNCTION)(**inputs)
    out = cls.execute(**inputs)
    return tuple(out.result) if hasattr(out, "result") else out


# (class_type, inputs) -> the node's outputs in place of running it, or None to run it (it may fill inputs first)
Override = Callable[[str, dict], "tuple | None"]


def run_prompt(prompt: dict, classes: dict, override: Override | None = None) -> dict:
    """An API-format workflow run node by node in dependency order with ComfyUI's node classes, its one SaveImage
    replaced by what it would write: {"prompt", "pngs_rgb": [{"shape", "u8"}, ...]}."""
    results: dict[str, tuple] = {}

    def run(node_id: str) -> tuple:
        if node_id not in results:
            node = prompt[node_id]
            inputs = {k: run(v[0])[v[1]] if isinstance(v, list) else v for k, v in node["inputs"].items()}
            given = override(node["class_type"], inputs) if override else None
            if node["class_type"] == "SaveImage":
                results[node_id] = (inputs["images"],)
            elif given is not None:
                results[node_id] = given
            else:
                results[node_id] = run_node(classes[node["class_type"]], inputs)
        return results[node_id]

    (save,) = [k for k, v in prompt.items() if v["class_type"] == "SaveImage"]
    return {"prompt": prompt, "pngs_rgb": [png_rgb(im) for im in run(save)[0]]}
