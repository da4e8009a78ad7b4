"""GET /queue (running and pending items) and POST /queue (clear / delete pending items)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from .common import bad_request, json_response, read_json_object

if TYPE_CHECKING:
    from .app import PromptServer


def add_routes(routes: web.RouteTableDef, server: PromptServer) -> None:
    @routes.get("/queue")
    async def get_queue(request: web.Request) -> web.Response:
        # A queue that keeps its answer encoded until it changes (the hosted server's) sends it as it is.
        encoded = getattr(server.prompt_queue, "encoded_queue", None)
        if encoded is not None:
            return web.Response(body=encoded(), content_type="application/json")
        running, pending = server.prompt_queue.get_current_queue()
        return json_response({"queue_running": running, "queue_pending": pending})

    @routes.post("/queue")
    async def post_queue(request: web.Request) -> web.Response:
        body = await read_json_object(request)
        if not isinstance(body.get("delete") or [], list):
            raise bad_request("invalid_request", "delete must be a list of prompt ids")
        if body.get("clear"):
            server.prompt_queue.wipe_queue()
        for prompt_id in body.get("delete") or []:
            server.prompt_queue.delete_queue_item(lambda item, pid=prompt_id: item.prompt_id == pid)
        return web.Response(status=200)
