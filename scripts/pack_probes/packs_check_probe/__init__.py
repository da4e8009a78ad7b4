"""A probe that scripts/packs_check.py adds as one more custom_nodes folder, on real ComfyUI and on ours.

It registers no node; it answers GET /packs_check/routes with every route the loaded packs added through
PromptServer.instance.routes: method, path and the file of its handler, so the harness can tell which pack
owns which route (neither server has a route that says so).
"""

import inspect

from aiohttp import web
from server import PromptServer

NODE_CLASS_MAPPINGS: dict = {}


def _handler_file(handler) -> str:
    try:
        return inspect.getsourcefile(inspect.unwrap(handler)) or ""
    except TypeError:
        return ""


@PromptServer.instance.routes.get("/packs_check/routes")
async def pack_routes(request: web.Request) -> web.Response:
    routes = [
        {"method": r.method, "path": r.path, "file": _handler_file(r.handler)}
        for r in PromptServer.instance.routes
        if isinstance(r, web.RouteDef)
    ]
    return web.json_response(routes)
