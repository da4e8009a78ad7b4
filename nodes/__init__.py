"""ComfyUI's core nodes on torch + diffusers, importable as `nodes` like ComfyUI's nodes.py:
`NODE_CLASS_MAPPINGS`, `NODE_DISPLAY_NAME_MAPPINGS`, `MAX_RESOLUTION` and the node classes."""
from __future__ import annotations

import importlib

MAX_RESOLUTION = 16384

_MODULES = ("loaders", "model_nodes", "latent", "image", "image_io", "conditioning_ops", "cascade_nodes")

NODE_CLASS_MAPPINGS: dict[str, type] = {}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}

for _name in _MODULES:
    _module = importlib.import_module(f"nodes.{_name}")
    NODE_CLASS_MAPPINGS.update(_module.NODE_CLASS_MAPPINGS)
    NODE_DISPLAY_NAME_MAPPINGS.update(_module.NODE_DISPLAY_NAME_MAPPINGS)

# Node packs import core classes by name (`from nodes import KSampler`).
globals().update(NODE_CLASS_MAPPINGS)

from nodes.ksampler import common_ksampler  # noqa: E402,F401  (packs call nodes.common_ksampler)
