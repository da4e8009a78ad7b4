"""`comfy.quant_ops`: ComfyUI's quantized-weight names (FP8 / NVFP4 layouts over the comfy-kitchen package).

As in ComfyUI, with comfy_kitchen installed its tensor classes and the module `ck` are offered; without it
the names are empty placeholders and `ck` is absent, so a pack's `from comfy.quant_ops import ck` fails the
same way. Quantized weights themselves are loaded and computed by the executors, not by these classes.
"""

from __future__ import annotations

from typing import Any

import torch

try:
    import comfy_kitchen as ck  # noqa: F401  (packs call ck's kernels directly)
    from comfy_kitchen.tensor import (  # noqa: F401
        QuantizedLayout,
        QuantizedTensor,
        get_layout_class,
        register_layout_class,
        register_layout_op,
    )
    from comfy_kitchen.tensor import TensorCoreFP8Layout as _FP8Base
    from comfy_kitchen.tensor import TensorCoreNVFP4Layout as _NVFP4Base

    CK_AVAILABLE = True
except ImportError:
    CK_AVAILABLE = False

    class QuantizedTensor:  # type: ignore[no-redef]
        pass

    class QuantizedLayout:  # type: ignore[no-redef]
        pass

    class _FP8Base:  # type: ignore[no-redef]
        pass

    class _NVFP4Base:  # type: ignore[no-redef]
        pass

    def register_layout_class(name: str, cls: type) -> None:  # type: ignore[misc]
        pass

    def get_layout_class(name: str) -> Any:  # type: ignore[misc]
        return None

    def register_layout_op(*args: Any, **kwargs: Any) -> None:  # type: ignore[misc]
        pass


class TensorCoreFP8E4M3Layout(_FP8Base):
    FP8_DTYPE = torch.float8_e4m3fn


class TensorCoreFP8E5M2Layout(_FP8Base):
    FP8_DTYPE = torch.float8_e5m2


TensorCoreFP8Layout = TensorCoreFP8E4M3Layout  # ComfyUI's older name: E4M3


class TensorCoreNVFP4Layout(_NVFP4Base):
    pass


for _name, _cls in (
    ("TensorCoreFP8Layout", TensorCoreFP8Layout),
    ("TensorCoreFP8E4M3Layout", TensorCoreFP8E4M3Layout),
    ("TensorCoreFP8E5M2Layout", TensorCoreFP8E5M2Layout),
    ("TensorCoreNVFP4Layout", TensorCoreNVFP4Layout),
):
    register_layout_class(_name, _cls)

# The quantization formats a checkpoint's `comfy_quant` metadata names: storage dtype, the scale tensors that
# come with each weight, and the layout that computes with them.
QUANT_ALGOS = {
    "float8_e4m3fn": {
        "storage_t": torch.float8_e4m3fn,
        "parameters": {"weight_scale", "input_scale"},
        "comfy_tensor_layout": "TensorCoreFP8E4M3Layout",
    },
    "float8_e5m2": {
        "storage_t": torch.float8_e5m2,
        "parameters": {"weight_scale", "input_scale"},
        "comfy_tensor_layout": "TensorCoreFP8E5M2Layout",
    },
    "nvfp4": {
        "storage_t": torch.uint8,
        "parameters": {"weight_scale", "weight_scale_2", "input_scale"},
        "comfy_tensor_layout": "TensorCoreNVFP4Layout",
        "group_size": 16,
    },
}

__all__ = [
    "QuantizedTensor",
    "QuantizedLayout",
    "TensorCoreFP8Layout",
    "TensorCoreFP8E4M3Layout",
    "TensorCoreFP8E5M2Layout",
    "TensorCoreNVFP4Layout",
    "QUANT_ALGOS",
    "register_layout_op",
]
