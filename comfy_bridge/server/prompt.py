"""GET /prompt (queue counter) and POST /prompt (validate, then enqueue)."""
from __future__ import annotations

import logging
import time
import uuid
from typing import TYPE_CHECKING

from aiohttp import web

from .common import error_body, read_json_object
from .prompt_queue import SENSITIVE_EXTRA_DATA_KEYS, QueueItem

if TYPE_CHECKING:
    from .app import PromptServer

log = logging.getLogger(__name__)


def add_routes(routes: web.RouteTableDef, server: "PromptServer") -> None:
    @routes.get("/prompt")
    async def get_prompt(request: web.Request) -> web.Response:
        return web.json_response(server.get_queue_info())

    @routes.post("/prompt")
    async def post_prompt(request: web.Request) -> web.Response:
        log.info("got prompt")
        body = server.trigger_on_prompt(await read_json_object(request))
        if "number" in body:
            try:
                number = float(body["number"])
            except (TypeError, ValueError):
                return web.json_response(error_body("invalid_prompt", "number must be a number"), status=400)
        else:
            number = -server.number if body.get("front") else server.number
            server.number += 1
        prompt = body.get("prompt")
        if prompt is None:
            return web.json_response(error_body("no_prompt", "No prompt provided", "No prompt provided"), status=400)
        if not isinstance(prompt, dict):
            return web.json_response(error_body("invalid_prompt", "Prompt must be a JSON object"), status=400)
        prompt_id = str(body["prompt_id"]) if body.get("prompt_id") is not None else str(uuid.uuid4())
        targets = body.get("partial_execution_targets")
        valid, error, outputs, node_errors = await server.validate(prompt_id, prompt, targets)
        extra_data = body.get("extra_data") or {}
        if not isinstance(extra_data, dict):
            return web.json_response(error_body("invalid_prompt", "extra_data must be a JSON object"), status=400)
        if "client_id" in body:
            extra_data["client_id"] = body["client_id"]
        if not valid:
            log.warning("invalid prompt: %s", error)
            return web.json_response({"error": error, "node_errors": node_errors}, status=400)
        sensitive = {k: extra_data.pop(k) for k in SENSITIVE_EXTRA_DATA_KEYS if k in extra_data}
        extra_data["create_time"] = int(time.time() * 1000)  # the /jobs API sorts by it
        server.prompt_queue.put(QueueItem(number, prompt_id, prompt, extra_data, list(outputs), sensitive))
        return web.json_response({"prompt_id": prompt_id, "number": number, "node_errors": node_errors})
