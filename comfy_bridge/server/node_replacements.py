"""GET /node_replacements: the node replacement registry (comfy_bridge.node_replace), as today's ComfyUI
answers it ({deprecated class: [replacement, ...]}), less replacements by a class not offered here. The web
UI 1.58.1 asks for it when /features says `node_replacements` and offers each missing node's first
replacement in its missing-nodes panel."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from comfy_bridge.node_replace import node_replace_manager

from .common import json_response

if TYPE_CHECKING:
    from .app import PromptServer


def add_routes(routes: web.RouteTableDef, server: PromptServer) -> None:
    @routes.get("/node_replacements")
    async def get_node_replacements(request: web.Request) -> web.Response:
        # Only successors this server offers: ComfyUI's own list names classes we may not have yet (Load3D,
        # the paid Gemini nodes), and the web UI's swap to a class it cannot create fails; such a node is
        # shown as missing instead, as any class we lack.
        return json_response(node_replace_manager().as_dict(getattr(server.registry, "classes", {})))
