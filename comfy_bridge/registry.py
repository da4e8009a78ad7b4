"""The node registry: every node class (core + custom packs) and its /object_info entry."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine, Iterable
from pathlib import Path
from typing import Any

from comfy_bridge.execution.nodeapi import is_v3

log = logging.getLogger(__name__)


class NodeRegistry:
    def __init__(self) -> None:
        self.classes: dict[str, type] = {}
        self.display_names: dict[str, str] = {}
        self.web_directories: dict[str, Path] = {}
        self.builtin: set[str] = set()
        self.loaded_module_dirs: dict[str, str] = {}
        self.import_failures: dict[str, str] = {}  # pack path -> formatted traceback

    def get(self, class_type: str) -> type | None:
        return self.classes.get(class_type)

    def add_builtin(self, mappings: dict[str, type], display_names: dict[str, str] | None = None) -> None:
        """Core nodes: custom packs cannot replace these names."""
        self.classes.update(mappings)
        self.builtin.update(mappings)
        self.display_names.update(display_names or {})

    def add_custom(self, mappings: dict[str, type], display_names: dict[str, str] | None, module: str) -> None:
        for key, cls in mappings.items():
            if key in self.builtin:
                continue
            cls.RELATIVE_PYTHON_MODULE = module
            self.classes[key] = cls
        self.display_names.update(display_names or {})

    def node_info(self, class_type: str) -> dict:
        """The /object_info entry, shaped exactly like today's ComfyUI's for a plain class (key order included)."""
        cls = self.classes[class_type]
        if is_v3(cls):
            return cls.GET_NODE_INFO_V1()
        inputs = cls.INPUT_TYPES()
        info: dict[str, Any] = {
            "input": inputs,
            "input_order": {key: list(value.keys()) for key, value in inputs.items()},
            "is_input_list": getattr(cls, "INPUT_IS_LIST", False),
            "output": cls.RETURN_TYPES,
            "output_is_list": cls.OUTPUT_IS_LIST if hasattr(cls, "OUTPUT_IS_LIST") else [False] * len(cls.RETURN_TYPES),
            "output_name": cls.RETURN_NAMES if hasattr(cls, "RETURN_NAMES") else cls.RETURN_TYPES,
            "name": class_type,
            "display_name": self.display_names.get(class_type, class_type),
            "description": getattr(cls, "DESCRIPTION", ""),
            "python_module": getattr(cls, "RELATIVE_PYTHON_MODULE", "nodes"),
            "category": getattr(cls, "CATEGORY", "sd"),
            "output_node": _flag(cls, "OUTPUT_NODE"),
            "has_intermediate_output": _flag(cls, "HAS_INTERMEDIATE_OUTPUT"),
        }
        if hasattr(cls, "OUTPUT_TOOLTIPS"):
            info["output_tooltips"] = cls.OUTPUT_TOOLTIPS
        # which MatchType template each output follows (our plain classes with dynamic inputs; V3 nodes say it
        # in their own entry)
        if hasattr(cls, "OUTPUT_MATCHTYPES"):
            info["output_matchtypes"] = cls.OUTPUT_MATCHTYPES
        for flag in ("deprecated", "experimental", "dev_only"):
            if getattr(cls, flag.upper(), False):
                info[flag] = True
        if hasattr(cls, "API_NODE"):
            info["api_node"] = cls.API_NODE
        info["search_aliases"] = getattr(cls, "SEARCH_ALIASES", [])
        if hasattr(cls, "ESSENTIALS_CATEGORY"):
            info["essentials_category"] = cls.ESSENTIALS_CATEGORY
        return info

    def object_info(self) -> dict[str, dict]:
        out = {}
        for class_type in self.classes:
            try:
                out[class_type] = self.node_info(class_type)
            except Exception:
                log.exception("[ERROR] An error occurred while retrieving information for the '%s' node.", class_type)
        return out


def _flag(cls: type, name: str) -> bool:
    """A class flag as ComfyUI's server reads it: True, or anything equal to True (1 counts)."""
    value = getattr(cls, name, False)
    return value is True or value == True  # noqa: E712


def run_coroutine_sync(coro: Coroutine) -> Any:
    """Run `coro` to completion from sync code, also when called inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as ex:  # re-raised in the caller's thread
            box["error"] = ex

    thread = threading.Thread(target=target, name="registry-loader")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


_core: tuple[dict, dict] | None = None


def _core_nodes() -> tuple[dict, dict]:
    # Read once: _publish later adds the packs to nodes.NODE_CLASS_MAPPINGS, and those are not core.
    global _core
    if _core is None:
        try:
            import nodes
        except ImportError:
            log.warning("core nodes package `nodes` is not importable; starting with custom nodes only")
            return {}, {}
        _core = (
            dict(getattr(nodes, "NODE_CLASS_MAPPINGS", None) or {}),
            dict(getattr(nodes, "NODE_DISPLAY_NAME_MAPPINGS", None) or {}),
        )
    return dict(_core[0]), dict(_core[1])


def build_registry(
    workspace: Any,
    extra_custom_node_dirs: Iterable[str | Path] = (),
    load_custom_nodes: bool = True,
    whitelist: Iterable[str] = (),
) -> NodeRegistry:
    """Core nodes from `nodes`, then the packs in the workspace's custom_nodes folders and the extra dirs
    (with load_custom_nodes False, only the packs named in `whitelist`)."""
    from comfy_bridge import compat
    from comfy_bridge.packs.torchvision_ops import make_torchvision_importable

    compat.install()
    make_torchvision_importable()  # core nodes import transformers' models, which import an installed torchvision
    registry = NodeRegistry()
    core, display = _core_nodes()
    registry.add_builtin(core, display)
    whitelist = set(whitelist)
    if load_custom_nodes or whitelist:
        from comfy_bridge.custom_nodes import load_custom_nodes as load

        dirs = [Path(d) for d in workspace.folder_paths("custom_nodes")] if workspace is not None else []
        dirs += [Path(d) for d in extra_custom_node_dirs]
        run_coroutine_sync(load(registry, dirs, None if load_custom_nodes else whitelist))
    _publish(registry)
    return registry


def _publish(registry: NodeRegistry) -> None:
    """Let packs that read `nodes.NODE_CLASS_MAPPINGS` / `nodes.EXTENSION_WEB_DIRS` see the full registry."""
    try:
        import nodes
    except ImportError:
        return
    mappings = getattr(nodes, "NODE_CLASS_MAPPINGS", None)
    if isinstance(mappings, dict):
        mappings.update(registry.classes)
    names = getattr(nodes, "NODE_DISPLAY_NAME_MAPPINGS", None)
    if isinstance(names, dict):
        names.update(registry.display_names)
    web = getattr(nodes, "EXTENSION_WEB_DIRS", None)
    if isinstance(web, dict):
        web.update({k: str(v) for k, v in registry.web_directories.items()})
    loaded = getattr(nodes, "LOADED_MODULE_DIRS", None)
    if isinstance(loaded, dict):
        loaded.update(registry.loaded_module_dirs)
