"""`server`: `PromptServer.instance` for node packs, and `BinaryEventTypes` (ComfyUI's server module
re-exports it from `protocol`). The real server (comfy_bridge.server) sets `instance`; without one, a
stub (on executors) collects routes and hooks on an application it never runs, and drops messages, so packs
still import there."""

from __future__ import annotations

import uuid  # noqa: F401  (ComfyUI's server module imports uuid; packs reach it as server.uuid)
from typing import Any

from aiohttp import web

from comfy_bridge.compat.protocol import BinaryEventTypes


class PromptServer:
    instance: Any = None

    def __init__(self) -> None:
        self.routes = web.RouteTableDef()
        # Never run: packs register startup hooks and routes on it at import (comfyui-deploy does).
        self.app = web.Application()
        self.loop = None
        self.client_id: str | None = None
        self.last_node_id: str | None = None
        self.last_prompt_id: str | None = None
        self.number = 0
        self.sockets: dict = {}
        self.sockets_metadata: dict = {}
        self.supports = ["custom_nodes_from_web"]
        self.prompt_queue = None
        self.on_prompt_handlers: list = []

    def send_sync(self, event: Any, data: Any, sid: str | None = None) -> None:
        pass

    async def send(self, event: Any, data: Any, sid: str | None = None) -> None:
        pass

    async def send_json(self, event: Any, data: Any, sid: str | None = None) -> None:
        pass

    async def send_bytes(self, event: int, data: bytes, sid: str | None = None) -> None:
        pass

    def send_progress_text(self, text: str, node_id: str, sid: str | None = None) -> None:
        pass

    def add_on_prompt_handler(self, handler: Any) -> None:
        self.on_prompt_handlers.append(handler)

    def trigger_on_prompt(self, json_data: dict) -> dict:
        for handler in self.on_prompt_handlers:
            json_data = handler(json_data)
        return json_data

    def queue_updated(self) -> None:
        pass


if PromptServer.instance is None:
    PromptServer.instance = PromptServer()

__all__ = ["BinaryEventTypes", "PromptServer"]
