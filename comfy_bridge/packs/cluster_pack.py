"""`comfy_cluster_nodes`: the nodes Comfy Cluster adds beyond ComfyUI's core set, exported the way a
pack exports its nodes (NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS).

They are registered with the core nodes (the `nodes` package imports their modules), so they are
always there and no custom pack can replace them; `comfy-cluster nodes list` shows them as this
built-in pack, and a pack that wants to reuse them imports the mappings from here.
"""

from __future__ import annotations

import importlib

PACK_NAME = "comfy_cluster_nodes"
# The modules of nodes/ that hold the cluster's own nodes (the others implement ComfyUI's core nodes).
MODULES = ("nodes.cascade_nodes",)


def _mappings() -> tuple[dict[str, type], dict[str, str]]:
    classes: dict[str, type] = {}
    names: dict[str, str] = {}
    for name in MODULES:
        module = importlib.import_module(name)
        classes.update(module.NODE_CLASS_MAPPINGS)
        names.update(getattr(module, "NODE_DISPLAY_NAME_MAPPINGS", {}))
    return classes, names


def __getattr__(name: str) -> dict:
    # Imported on first use, so that reading PACK_NAME does not import torch and the node modules.
    if name == "NODE_CLASS_MAPPINGS":
        return _mappings()[0]
    if name == "NODE_DISPLAY_NAME_MAPPINGS":
        return _mappings()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def node_names() -> list[str]:
    return sorted(_mappings()[0])
