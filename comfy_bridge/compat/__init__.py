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

ALIASES = (
    "folder_paths",
    "comfy",
    "comfy_execution",
    "comfy_api",
    "server",
    "protocol",
    "node_helpers",
    "latent_preview",
    "execution",
    "comfy_extras",
)

_installed: dict[str, str] = {}


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        pass  # already executed under its real name


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        root = fullname.partition(".")[0]
        if root in _installed:
            real = _installed[root] + fullname[len(root) :]
        elif root in _from_comfy_folder and root != fullname:
            real = _from_comfy_folder[root] + fullname[len(root) :]  # k_diffusion.sampling: one module object
        else:
            return None
        real_spec = importlib.util.find_spec(real)
        if real_spec is None:
            return None
        return importlib.machinery.ModuleSpec(
            fullname, _AliasLoader(real), is_package=real_spec.submodule_search_locations is not None
        )


class _ComfyFolderFinder(importlib.abc.MetaPathFinder):
    """ComfyUI puts its `comfy` folder on sys.path, so packs also write `import model_management` for
    `comfy.model_management`. This finder sits last on sys.meta_path: a module of that name anywhere on
    sys.path (a pack's own `utils`, say) wins, as it would in ComfyUI, where packs put their folders first."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if "comfy" not in _installed or "." in fullname:
            return None  # submodules of what this finder gave are the first finder's (one module object)
        real = f"{_installed['comfy']}.{fullname}"
        try:
            real_spec = importlib.util.find_spec(real)
        except ModuleNotFoundError:
            return None
        if real_spec is None:
            return None
        _from_comfy_folder[fullname] = real
        return importlib.machinery.ModuleSpec(
            fullname, _AliasLoader(real), is_package=real_spec.submodule_search_locations is not None
        )


_from_comfy_folder: dict[str, str] = {}  # top-level name -> our module, for `import model_management`
_finder = _AliasFinder()
_comfy_folder_finder = _ComfyFolderFinder()


def install() -> dict[str, str]:
    """Activate the aliases (idempotent); returns {ComfyUI name: our module} for those installed."""
    from comfy_bridge.compat.workspace_entry_points import is_entry_point

    for name in ALIASES:
        if name in _installed:
            continue
        found = sys.modules.get(name) or importlib.util.find_spec(name)
        origin = getattr(found, "__file__", None) or getattr(found, "origin", None)
        if found is not None and not is_entry_point(origin):
            continue  # a real module of that name exists: leave it alone (a workspace's forwarder is ours)
        _installed[name] = f"{__name__}.{name}"
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    if _comfy_folder_finder not in sys.meta_path:
        sys.meta_path.append(_comfy_folder_finder)
    return dict(_installed)


# The comfy modules ComfyUI has imported before it loads packs (its nodes.py pulls them in): packs reach
# them as attributes after a bare `import comfy` (comfy.sd1_clip, comfy.ldm.models.autoencoder, ...).
LOADED_BEFORE_PACKS = (
    "comfy.utils",
    "comfy.model_management",
    "comfy.cli_args",
    "comfy.sd",
    "comfy.sd1_clip",
    "comfy.sdxl_clip",
    "comfy.samplers",
    "comfy.sample",
    "comfy.sampler_helpers",
    "comfy.model_patcher",
    "comfy.model_base",
    "comfy.model_sampling",
    "comfy.conds",
    "comfy.controlnet",
    "comfy.clip_vision",
    "comfy.lora",
    "comfy.hooks",
    "comfy.patcher_extension",
    "comfy.latent_formats",
    "comfy.ops",
    "comfy.k_diffusion.sampling",
    "comfy.ldm.modules.attention",
    "comfy.ldm.models.autoencoder",
    "comfy.supported_models",
)


def import_as_comfyui_has() -> None:
    """install(), then import what ComfyUI has imported by the time packs load (torchvision among them,
    importable even when its compiled ops are not: comfy_bridge.packs.torchvision_ops)."""
    from comfy_bridge.packs.torchvision_ops import make_torchvision_importable

    install()
    make_torchvision_importable()
    for name in LOADED_BEFORE_PACKS:
        importlib.import_module(name)
