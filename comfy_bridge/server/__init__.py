"""The ComfyUI protocol server (aiohttp): HTTP routes, websocket, prompt queue and worker.

The names below load on first use (PEP 562): the light modules of this package (`config`, `prompt_queue`)
are read by the CLI before `serve` starts its executors, and importing them must not import the server
(torch, aiohttp: seconds of a cold start)."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "PromptServer": "app",
    "create_app": "app",
    "run_server": "app",
    "start_server": "app",
    "ServerConfig": "config",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
