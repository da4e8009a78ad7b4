"""GET /object_info and GET /object_info/{node_class}: node definitions from the registry."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from .app import PromptServer

log = logging.getLogger(__name__)


def add_routes(routes: web.RouteTableDef, server: PromptServer) -> None:
    @routes.get("/object_info")
    async def get_object_info(request: web.Request) -> web.Response:
        out = {}
        # One broken node definition must not hide the others (ComfyUI logs and skips it).
        for class_type in list(server.registry.classes):
            try:
                out[class_type] = server.registry.node_info(class_type)
            except Exception:
                log.exception("could not build /object_info for node %s", class_type)
        return web.json_response(out)

    @routes.get("/object_info/{node_class}")
    async def get_object_info_node(request: web.Request) -> web.Response:
        class_type = request.match_info["node_class"]
        if server.registry.get(class_type) is None:
            return web.json_response({})
        return web.json_response({class_type: server.registry.node_info(class_type)})
