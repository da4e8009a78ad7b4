"""GET /prompt (queue counter) and POST /prompt (validate, then enqueue)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .common import error_body, json_response, over_limit, read_json_object
from .prompt_queue import MAX_QUEUE_NUMBER, SENSITIVE_EXTRA_DATA_KEYS, QueueItem, queue_number

if TYPE_CHECKING:
    from .app import PromptServer

log = logging.getLogger(__name__)


def _invalid(message: str, details: str = "") -> web.Response:
    return json_response(error_body("invalid_prompt", message, details), status=400)


def shape_error(prompt: dict) -> str | None:
    """What makes `prompt` not a map of nodes the validator can read (it expects dicts with a string
    class_type and a dict of inputs); None when it is one."""
    for node_id, node in prompt.items():
        if not isinstance(node, dict):
            return f"node {node_id} must be a JSON object"
        if "class_type" in node and not isinstance(node["class_type"], str):
            return f"node {node_id}: class_type must be a string"
        if not isinstance(node.get("inputs", {}), dict):
            return f"node {node_id}: inputs must be a JSON object"
    return None


def extra_data_error(extra_data: dict) -> str | None:
    """What in extra_data has another shape than ComfyUI gives it (extra_pnginfo: an object of PNG text
    chunks that SaveImage and the job views read; the Comfy.org credentials: strings); None when fine.
    Other keys pass through untouched, as in ComfyUI."""
    if not isinstance(extra_data.get("extra_pnginfo", {}), (dict, type(None))):
        return 'extra_pnginfo must be a JSON object (e.g. {"workflow": {...}})'
    for key in SENSITIVE_EXTRA_DATA_KEYS:
        if not isinstance(extra_data.get(key), (str, type(None))):
            return f"{key} must be a string"
    return None


def longest_text(prompt: dict) -> tuple[int, str]:
    """(length, where) of the longest string in the prompt's nodes: long texts cost CPU in every
    text encoder (tokenized, then encoded 77 tokens at a time)."""
    longest, where = 0, ""
    stack: list[tuple[Any, str]] = [(node, str(node_id)) for node_id, node in prompt.items()]
    while stack:  # iterative: a deeply nested input must not exhaust the stack
        value, path = stack.pop()
        if isinstance(value, str):
            if len(value) > longest:
                longest, where = len(value), path
        elif isinstance(value, dict):
            stack.extend((v, f"{path}.{k}" if path.count(".") < 2 else path) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, path) for v in value)
    return longest, where


def add_routes(routes: web.RouteTableDef, server: PromptServer) -> None:
    @routes.get("/prompt")
    async def get_prompt(request: web.Request) -> web.Response:
        return json_response(server.get_queue_info())

    @routes.post("/prompt")
    async def post_prompt(request: web.Request) -> web.Response:
        log.info("got prompt")
        max_bytes, max_chars = server.prompt_limits(request)
        size = len(await request.read())
        if max_bytes is not None and size > max_bytes:
            raise over_limit(413, "max_prompt_bytes", max_bytes, f"prompt is {size} bytes")
        body = server.trigger_on_prompt(await read_json_object(request))
        if "number" in body:
            number = queue_number(body["number"])
            if number is None:
                return _invalid("number must be a finite number", f"at most {MAX_QUEUE_NUMBER} in magnitude")
        else:
            number = -server.number if body.get("front") else server.number
            server.number += 1
        prompt = body.get("prompt")
        if prompt is None:
            return json_response(error_body("no_prompt", "No prompt provided", "No prompt provided"), status=400)
        if not isinstance(prompt, dict):
            return _invalid("Prompt must be a JSON object")
        problem = shape_error(prompt)
        if problem is not None:
            return _invalid("Prompt is not a map of nodes", problem)
        if max_chars is not None:
            length, where = longest_text(prompt)
            if length > max_chars:
                raise over_limit(413, "max_text_chars", max_chars, f"text at node {where} is {length} characters")
        targets = body.get("partial_execution_targets")
        if targets is not None and not (isinstance(targets, list) and all(isinstance(t, str) for t in targets)):
            return _invalid("partial_execution_targets must be a list of node ids (strings)")
        extra_data = body.get("extra_data") or {}
        if not isinstance(extra_data, dict):
            return _invalid("extra_data must be a JSON object")
        if "client_id" in body:
            extra_data["client_id"] = body["client_id"]
        if not isinstance(extra_data.get("client_id"), (str, type(None))):
            # The id addresses websocket messages: anything else would make every message undeliverable.
            return _invalid("client_id must be a string")
        problem = extra_data_error(extra_data)
        if problem is not None:
            return _invalid("extra_data has the wrong shape", problem)
        prompt_id = str(body["prompt_id"]) if body.get("prompt_id") is not None else str(uuid.uuid4())
        # As ComfyUI: a retired class that has an offered successor runs as that successor.
        server.node_replace_manager.apply_replacements(prompt, getattr(server.registry, "classes", {}))
        valid, error, outputs, node_errors = await server.validate(prompt_id, prompt, targets)
        if not valid:
            log.warning("invalid prompt: %s", error)
            return json_response({"error": error, "node_errors": node_errors}, status=400)
        sensitive = {k: extra_data.pop(k) for k in SENSITIVE_EXTRA_DATA_KEYS if k in extra_data}
        extra_data["create_time"] = int(time.time() * 1000)  # the /jobs API sorts by it
        # Off the event loop: a durable queue writes to its store (behind the worker's transactions),
        # and every other request would wait for it.
        await asyncio.to_thread(
            server.prompt_queue.put, QueueItem(number, prompt_id, prompt, extra_data, list(outputs), sensitive)
        )
        return json_response({"prompt_id": prompt_id, "number": number, "node_errors": node_errors})
