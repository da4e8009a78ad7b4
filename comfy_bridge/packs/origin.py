"""Which pack each custom node class came from, and which pack node is running now.

The loader records every class it registers; error messages and the executor (which imports the
pack by path to run its node) read it back.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass


@dataclass(frozen=True)
class PackOrigin:
    pack: str  # the pack's name: its folder, or its file's stem
    path: str  # the pack entry as loaded: a package folder or a .py file
    node_id: str  # the class_type the class was registered under


_origins: dict[type, PackOrigin] = {}
_running: contextvars.ContextVar[PackOrigin | None] = contextvars.ContextVar("comfy_pack_node", default=None)


def record(cls: type, origin: PackOrigin) -> None:
    _origins[cls] = origin


def origin_of(cls: type) -> PackOrigin | None:
    return _origins.get(cls)


def running() -> PackOrigin | None:
    """The pack node whose code is running in this context (None outside pack code)."""
    return _running.get()


def set_running(origin: PackOrigin | None) -> contextvars.Token:
    return _running.set(origin)


def reset_running(token: contextvars.Token) -> None:
    _running.reset(token)


def unsupported_message(feature: str, why: str = "") -> str:
    where = running()
    who = f"node pack {where.pack!r}, node {where.node_id!r}" if where else "a custom node"
    return f"{who} uses {feature}, which Comfy Cluster does not support" + (f": {why}" if why else "")


class UnsupportedFeature(NotImplementedError):
    """A pack called part of ComfyUI that Comfy Cluster cannot honour; the message names pack, node and feature."""

    def __init__(self, feature: str, why: str = "") -> None:
        super().__init__(unsupported_message(feature, why))
        self.feature = feature
        self.origin = running()


class UnsupportedAttribute(AttributeError):
    """Reading an attribute the proxies do not offer (an AttributeError, so hasattr/getattr defaults work)."""

    def __init__(self, feature: str, why: str = "") -> None:
        super().__init__(unsupported_message(feature, why))
        self.feature = feature
