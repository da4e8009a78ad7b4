"""GET /node_replacements: the node replacement registry (comfy_bridge.node_replace), as today's ComfyUI
answers it ({deprecated class: [replacement, ...]}). The web UI 1.58.1 asks for it when /features says
`node_replacements` and offers each missing node's first replacement in its missing-nodes panel."""
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
        return json_response(node_replace_manager().as_dict())
