"""GET /history (paged), GET /history/{prompt_id}, POST /history (clear / delete)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from .common import bad_request, json_response, query_int, read_json_object

if TYPE_CHECKING:
    from .app import PromptServer


def add_routes(routes: web.RouteTableDef, server: PromptServer) -> None:
    @routes.get("/history")
    async def get_history(request: web.Request) -> web.Response:
        max_items = query_int(request, "max_items")
        offset = query_int(request, "offset", -1)
        # A queue that keeps its answer encoded until it changes (the hosted server's) sends it as it is.
        encoded = getattr(server.prompt_queue, "encoded_history", None)
        if encoded is not None:
            return web.Response(body=encoded(max_items=max_items, offset=offset), content_type="application/json")
        return json_response(server.prompt_queue.get_history(max_items=max_items, offset=offset))

    @routes.get("/history/{prompt_id}")
    async def get_history_prompt(request: web.Request) -> web.Response:
        return json_response(server.prompt_queue.get_history(prompt_id=request.match_info["prompt_id"]))

    @routes.post("/history")
    async def post_history(request: web.Request) -> web.Response:
        body = await read_json_object(request)
        if not isinstance(body.get("delete") or [], list):
            raise bad_request("invalid_request", "delete must be a list of prompt ids")
        if body.get("clear"):
            server.prompt_queue.wipe_history()
        for prompt_id in body.get("delete") or []:
            server.prompt_queue.delete_history_item(str(prompt_id))
        return web.Response(status=200)
