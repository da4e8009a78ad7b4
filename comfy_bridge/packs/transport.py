"""Moving a pack node's arguments and results between the head and an executor.

Tensors travel as tensors (the runtime's data plane), everything else is pickled. Pack modules are
imported under their file path (ComfyUI's rule), so an executor that meets a class from a pack it has
not imported yet imports the pack from that path first.

Pickling is cloudpickle's: what a module names at its top level travels by reference as with pickle, and a
function that cannot be named, such as a closure a pack node makes (sd-dynamic-thresholding's CFG function,
set on the model), travels by value, its code with the variables it closes over; the classes and functions
those refer to in the pack are imported from the pack on the executor, which runs the same pack code (its
sources are checked against the head's). The executors unpickle only what the head sends, as before.
"""

from __future__ import annotations

import importlib
import io
import os
import pickle
import sys
from pathlib import Path
from typing import Any

import cloudpickle
import torch

from nodes.modelfns import model_patches

TENSOR_PREFIX = "t."


class _Pickler(cloudpickle.Pickler):
    def __init__(self, file: io.BytesIO, tensors: dict[str, torch.Tensor]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.tensors = tensors

    def persistent_id(self, obj: Any) -> str | None:
        if isinstance(obj, torch.Tensor):
            name = f"{TENSOR_PREFIX}{len(self.tensors)}"
            self.tensors[name] = obj
            return name
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, tensors: dict[str, torch.Tensor]) -> None:
        super().__init__(file)
        self.tensors = tensors

    def persistent_load(self, pid: str) -> torch.Tensor:
        return self.tensors[pid]

    def find_class(self, module: str, name: str) -> Any:
        if module not in sys.modules:
            import_pack_module(module)
        return super().find_class(module, name)


def dumps(obj: Any) -> tuple[bytes, dict[str, torch.Tensor]]:
    """(pickled structure, its tensors by name)."""
    tensors: dict[str, torch.Tensor] = {}
    buf = io.BytesIO()
    _Pickler(buf, tensors).dump(obj)
    return buf.getvalue(), tensors


def loads(data: bytes, tensors: dict[str, torch.Tensor]) -> Any:
    return _Unpickler(io.BytesIO(data), tensors).load()


def dumps_plain(obj: Any) -> bytes:
    """Pickle with tensors inline (for values inside another pickle, such as a ModelFn payload)."""
    return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def loads_plain(data: bytes) -> Any:
    """Unpickle `dumps_plain` output, importing the packs it refers to."""
    return _Unpickler(io.BytesIO(data), {}).load()


def bytes_to_tensor(data: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def tensor_to_bytes(t: torch.Tensor) -> bytes:
    return t.contiguous().numpy().tobytes()


def import_pack_module(module: str) -> None:
    """Import the pack a module name points at (a file path, with `_x_` for dots in package folders)."""
    if not os.path.isabs(module):
        return
    from comfy_bridge import compat
    from comfy_bridge.custom_nodes import import_module_file

    compat.import_as_comfyui_has()  # the pack imports folder_paths, comfy.*, ...
    if Path(module + ".py").is_file():  # a single-file pack
        import_module_file(Path(module + ".py"))
        return
    root = module.partition(".")[0]  # a package pack, or a submodule of one
    folder = Path(root.replace("_x_", "."))
    if not (folder / "__init__.py").is_file():
        return
    if root not in sys.modules:
        import_module_file(folder)
    if module != root:
        importlib.import_module(module)


# MODEL patches that packs install travel in a denoise step's params: carried by this module, which
# imports their packs on the executor.
model_patches.set_codec(__name__)
