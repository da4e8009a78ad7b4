"""Loading custom node packs from custom_nodes folders, with ComfyUI's rules.

Each entry (a `.py` file or a package folder) is imported under its file path; V1 packs export
NODE_CLASS_MAPPINGS, V3 packs a `comfy_entrypoint()` returning a ComfyExtension. A pack that fails to
import is logged and recorded; the others still load. Before any pack is imported, each pack folder's
`prestartup_script.py` runs. With custom nodes disabled, only whitelisted packs load.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import os
import sys
import time
import tomllib
import traceback
from pathlib import Path
from typing import Any

import nodes
from comfy_bridge import compat
from comfy_bridge.node_replace import node_replace_manager
from comfy_bridge.packs.origin import PackOrigin, record
from comfy_bridge.packs.pip_guard import guard_pack_installs_at_runtime
from comfy_bridge.registry import NodeRegistry

log = logging.getLogger(__name__)


def import_module_file(path: Path) -> tuple[Any, str, Path]:
    """Import a pack (file or package dir) the way ComfyUI does; returns (module, name, module dir)."""
    if path.is_file():
        name = path.stem
        module_dir = path.parent
        spec = importlib.util.spec_from_file_location(str(path.with_suffix("")), path)
    else:
        name = path.name
        module_dir = path
        spec = importlib.util.spec_from_file_location(str(path).replace(".", "_x_"), path / "__init__.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(spec.name, None)
        raise
    return module, name, module_dir


def _pyproject_web_dir(pack_dir: Path) -> tuple[str, Path] | None:
    """`[tool.comfy] web = "dir"` of the pack's pyproject.toml -> (project name, web dir)."""
    pyproject = pack_dir / "pyproject.toml"
    if not pyproject.is_file():
        return None
    try:
        data = tomllib.loads(pyproject.read_text())
        web = data.get("tool", {}).get("comfy", {}).get("web")
        name = data.get("project", {}).get("name")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    if web and name and (pack_dir / web).is_dir():
        return name, (pack_dir / web).resolve()
    return None


async def load_pack(registry: NodeRegistry, path: Path) -> bool:
    """Import one pack and register its nodes; False (and a logged traceback) when it fails."""
    try:
        module, name, module_dir = import_module_file(path)
        registry.loaded_module_dirs[name] = str(module_dir.resolve())
        if path.is_dir():
            found = _pyproject_web_dir(path)
            if found:
                registry.web_directories[found[0]] = found[1]
        web = getattr(module, "WEB_DIRECTORY", None)
        if web is not None and (module_dir / web).is_dir():
            registry.web_directories[name] = (module_dir / web).resolve()
            nodes.EXTENSION_WEB_DIRS[name] = str(registry.web_directories[name])
        relative = f"custom_nodes.{name}"
        if path.is_dir():  # ComfyUI reads a pack folder's node_replacements.json whatever its node API
            node_replace_manager().load_from_json(module_dir, name)
        mappings = getattr(module, "NODE_CLASS_MAPPINGS", None)
        if mappings is not None:
            registry.add_custom(mappings, getattr(module, "NODE_DISPLAY_NAME_MAPPINGS", None), relative)
            _record_origins(registry, mappings, name, path)
            return True
        entrypoint = getattr(module, "comfy_entrypoint", None)
        if entrypoint is not None:
            extension = entrypoint()
            if inspect.isawaitable(extension):
                extension = await extension
            await extension.on_load()  # where packs register node replacements, as in ComfyUI
            node_list = await extension.get_node_list()
            if not isinstance(node_list, list):
                raise TypeError("comfy_entrypoint's get_node_list() must return a list")
            for cls in node_list:
                schema = cls.GET_SCHEMA()
                registry.add_custom(
                    {schema.node_id: cls},
                    {schema.node_id: schema.display_name} if schema.display_name else None,
                    relative,
                )
                _record_origins(registry, {schema.node_id: cls}, name, path)
            return True
        log.warning("Skip %s module for custom nodes due to the lack of NODE_CLASS_MAPPINGS or NODES_LIST.", path)
        registry.import_failures[str(path)] = "no NODE_CLASS_MAPPINGS or comfy_entrypoint"
        return False
    except (Exception, SystemExit):  # a pack that exits while it imports (rembg without onnxruntime) fails alone
        tb = traceback.format_exc()
        log.warning("%s\nCannot import %s module for custom nodes:", tb, path)
        registry.import_failures[str(path)] = tb
        return False


def _record_origins(registry: NodeRegistry, mappings: dict, name: str, path: Path) -> None:
    for key, cls in mappings.items():
        if registry.classes.get(key) is cls:
            record(cls, PackOrigin(name, str(path), key))


async def pack_classes(path: Path) -> dict[str, type]:
    """{class_type: class} of one pack, importing it if this process has not (an executor does this)."""
    from comfy_bridge.packs.transport import import_pack_module

    key = str(path.with_suffix("")) if path.is_file() else str(path).replace(".", "_x_")
    import_pack_module(key)
    module = sys.modules[key]
    mappings = getattr(module, "NODE_CLASS_MAPPINGS", None)
    if mappings is not None:
        return dict(mappings)
    extension = module.comfy_entrypoint()
    if inspect.isawaitable(extension):
        extension = await extension
    return {cls.GET_SCHEMA().node_id: cls for cls in await extension.get_node_list()}


def pack_entries(directory: Path) -> list[Path]:
    """The importable entries of a custom_nodes folder (sorted, unlike ComfyUI, for reproducible overrides)."""
    if not directory.is_dir():
        return []
    entries = []
    for name in sorted(os.listdir(os.path.realpath(directory))):
        path = directory / name
        if name == "__pycache__" or name.endswith(".disabled") or name.startswith("."):
            continue
        if path.is_file() and path.suffix != ".py":
            continue
        entries.append(path)
    return entries


def _allowed(path: Path, only: set[str] | None) -> bool:
    return only is None or path.name in only or path.stem in only


def run_prestartup_scripts(directories: list[Path], only: set[str] | None = None) -> dict[str, bool]:
    """Run `prestartup_script.py` of every pack folder (files and disabled folders skipped), as ComfyUI
    does before importing packs; a failing script is logged and loading goes on. {script: ok}."""
    results: dict[str, bool] = {}
    times = []
    for directory in directories:
        for path in pack_entries(Path(directory)):
            script = path / "prestartup_script.py"
            if not path.is_dir() or not script.is_file() or not _allowed(path, only):
                continue
            start = time.perf_counter()
            try:
                spec = importlib.util.spec_from_file_location("prestartup_script", script)
                assert spec is not None and spec.loader is not None
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
                results[str(script)] = True
            except Exception:
                log.warning("%s\nFailed to execute startup-script: %s", traceback.format_exc(), script)
                results[str(script)] = False
            times.append((time.perf_counter() - start, path, results[str(script)]))
    if times:
        log.info("Prestartup times for custom nodes:")
        for seconds, path, ok in sorted(times, key=lambda t: t[0]):
            log.info("%6.1f seconds%s: %s", seconds, "" if ok else " (PRESTARTUP FAILED)", path)
    return results


async def load_custom_nodes(registry: NodeRegistry, directories: list[Path], only: set[str] | None = None) -> None:
    """Prestartup scripts, then every pack of `directories` (only those named in `only`, when given:
    ComfyUI's --disable-all-custom-nodes with --whitelist-custom-nodes). pip runs that packs start
    themselves meanwhile cannot replace torch (PIP_CONSTRAINT)."""
    directories = [Path(d) for d in directories]
    compat.import_as_comfyui_has()
    guard_pack_installs_at_runtime()
    run_prestartup_scripts(directories, only)
    times = []
    for directory in directories:
        for path in pack_entries(directory):
            if not _allowed(path, only):
                continue
            start = time.perf_counter()
            ok = await load_pack(registry, path)
            times.append((time.perf_counter() - start, path, ok))
    for name, folder in list(nodes.EXTENSION_WEB_DIRS.items()):  # what packs put there themselves
        if name not in registry.web_directories and Path(folder).is_dir():
            registry.web_directories[name] = Path(folder).resolve()
    if times:
        log.info("Import times for custom nodes:")
        for seconds, path, ok in sorted(times, key=lambda t: t[0]):
            log.info("%6.1f seconds%s: %s", seconds, "" if ok else " (IMPORT FAILED)", path)
