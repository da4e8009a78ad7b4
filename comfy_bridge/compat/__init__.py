"""The module names ComfyUI node packs import (`folder_paths`, `comfy.utils`, `comfy_api.latest`, ...).

`install()` makes each top-level name resolve to the package of the same name under
comfy_bridge.compat, but only for names nothing else on sys.path provides. An alias finder maps
`comfy.utils` to `comfy_bridge.compat.comfy.utils` (the same module object, so state is not doubled).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

ALIASES = ("folder_paths", "comfy", "comfy_execution", "comfy_api", "server", "protocol", "node_helpers",
           "latent_preview", "execution", "comfy_extras")

_installed: dict[str, str] = {}


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        pass  # already executed under its real name


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        root = fullname.partition(".")[0]
        if root not in _installed:
            return None
        real = _installed[root] + fullname[len(root):]
        real_spec = importlib.util.find_spec(real)
        if real_spec is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(real),
                                              is_package=real_spec.submodule_search_locations is not None)


_finder = _AliasFinder()


def install() -> dict[str, str]:
    """Activate the aliases (idempotent); returns {ComfyUI name: our module} for those installed."""
    for name in ALIASES:
        if name in _installed:
            continue
        if name in sys.modules or importlib.util.find_spec(name) is not None:
            continue  # a real module of that name exists: leave it alone
        _installed[name] = f"{__name__}.{name}"
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    return dict(_installed)
