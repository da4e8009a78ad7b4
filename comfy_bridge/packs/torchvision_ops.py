"""`import torchvision` where its compiled ops cannot load beside this torch.

A torchvision wheel built for another torch build (the default index's CUDA build beside a CPU torch) fails
at import: its C extension does not load, and its Python side then registers fake kernels for
`torchvision::nms` and `torchvision::qnms`, ops nobody defined ("operator torchvision::nms does not exist").
Packs (and transformers' image processors) import torchvision for its transforms, which are Python. So
when that import fails so, the two op schemas are declared and torchvision is imported again: transforms
work, the compiled ops (nms, roi_align, deform_conv2d, its image codecs) raise when called, and a warning
says how to install the torchvision of this torch's build (docs/packs.md). A torchvision whose ops load is
imported as it is: declaring the schemas first would collide with its own registration.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys

import torch

log = logging.getLogger(__name__)

_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor qdets, Tensor scores, float iou_threshold) -> Tensor",
)
_declared: list[torch.library.Library] = []  # the library must live as long as the process


def make_torchvision_importable() -> bool:
    """Import torchvision when it is installed; True when its op schemas had to be declared for that."""
    if "torchvision" in sys.modules or importlib.util.find_spec("torchvision") is None:
        return False
    try:
        importlib.import_module("torchvision")
        return False
    except RuntimeError as err:
        if "torchvision::" not in str(err):
            raise
        reason = str(err)
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]  # the half-imported package
    if not _declared:
        library = torch.library.Library("torchvision", "DEF")
        for schema in _SCHEMAS:
            library.define(schema)
        _declared.append(library)
    importlib.import_module("torchvision")
    log.warning(
        "torchvision imports without its compiled ops (%s): it was built for another torch than %s. "
        "Its transforms work; nms, roi_align and its image codecs do not. Install the torchvision of "
        "this torch's build (docs/packs.md, on a CPU host: pip install torchvision --index-url "
        "https://download.pytorch.org/whl/cpu)",
        reason,
        torch.__version__,
    )
    return True
