"""ComfyUI's core nodes on torch + diffusers, importable as `nodes` like ComfyUI's nodes.py:
`NODE_CLASS_MAPPINGS`, `NODE_DISPLAY_NAME_MAPPINGS`, `MAX_RESOLUTION` and the node classes.

The node modules load on the first attribute that needs them (PEP 562), not on `import nodes`: the
package also holds light modules every layer above reads (`nodes.workspace`, `nodes.safe_paths`,
`nodes.progress`), and importing one of them must not pull in torch (1.6 s for `comfy-cluster --help`)."""

from __future__ import annotations

import importlib
import threading
from pathlib import Path
from typing import Any

MAX_RESOLUTION = 16384
# ComfyUI's {pack name: web folder}: the server serves each under /extensions/<name>/; packs may add to it
# directly instead of declaring WEB_DIRECTORY (Impact Pack does).
EXTENSION_WEB_DIRS: dict[str, str] = {}

_MODULES = ("loaders", "model_nodes", "latent", "image", "image_io", "conditioning_ops", "cascade_nodes")
_load_lock = threading.RLock()  # re-entrant: a node module being loaded may read `nodes.X` itself


def _load() -> None:
    """Import the node modules once and publish their classes as this module's attributes."""
    with _load_lock:
        if "NODE_CLASS_MAPPINGS" in globals():
            return
        mappings: dict[str, type] = {}
        display: dict[str, str] = {}
        for name in _MODULES + _library_modules():
            module = importlib.import_module(f"nodes.{name}")
            mappings.update(module.NODE_CLASS_MAPPINGS)
            display.update(module.NODE_DISPLAY_NAME_MAPPINGS)
        from nodes.core_calls import both_ways, wrap_node_class
        from nodes.ksampler import common_ksampler

        for cls in mappings.values():  # packs call core node functions from their sync code, as in ComfyUI
            wrap_node_class(cls)
        _add_search_aliases(mappings)
        common_ksampler = both_ways(common_ksampler)  # packs call nodes.common_ksampler too
        # Node packs import core classes by name (`from nodes import KSampler`).
        globals().update(mappings)
        globals().update(common_ksampler=common_ksampler, NODE_DISPLAY_NAME_MAPPINGS=display)
        globals()["NODE_CLASS_MAPPINGS"] = mappings  # last: its presence marks the load complete


def _add_search_aliases(mappings: dict[str, type]) -> None:
    """ComfyUI 0.10.0's search aliases (recorded in library/search_aliases.json) on the classes that do not
    declare their own (those took theirs from the newest ComfyUI source)."""
    import json

    recorded = json.loads((Path(__file__).parent / "library" / "search_aliases.json").read_text())["classes"]
    for name, cls in mappings.items():
        if name in recorded and "SEARCH_ALIASES" not in vars(cls):
            cls.SEARCH_ALIASES = recorded[name]


def interrupt_processing(value: bool = True) -> None:
    """ComfyUI's nodes.interrupt_processing: ask the running prompt to stop (packs call it from routes)."""
    from nodes import progress

    progress.interrupt(value)


async def init_extra_nodes(init_custom_nodes: bool = True, init_api_nodes: bool = True) -> list[str]:
    """ComfyUI 0.3's loader of its extra nodes: here every core node class loads with the first use of
    `nodes`, and packs are loaded by the server at its start, so this loads the core classes and reports
    no failed imports."""
    _load()
    return []


def _library_modules() -> tuple[str, ...]:
    """The node families of `nodes/library/` (one module each, named after ComfyUI's `comfy_extras`
    module it stands for), in name order; each exports NODE_CLASS_MAPPINGS and NODE_DISPLAY_NAME_MAPPINGS."""
    folder = Path(__file__).parent / "library"
    return tuple(f"library.{p.stem}" for p in sorted(folder.glob("*.py")) if p.stem != "__init__")


def __getattr__(name: str) -> Any:
    if name.startswith("__") or _is_submodule(name):
        # Import machinery probing (__path__ ...), or `from nodes import progress` asking whether the
        # submodule is an attribute yet: answering no makes it import just that submodule.
        raise AttributeError(name)
    _load()
    try:
        return globals()[name]
    except KeyError:
        raise AttributeError(f"module 'nodes' has no attribute {name!r}") from None


def _is_submodule(name: str) -> bool:
    here = Path(__file__).parent
    return (here / f"{name}.py").is_file() or (here / name / "__init__.py").is_file()
