"""Small helpers shared by the route modules."""
from __future__ import annotations

import json
from typing import Any

from aiohttp import web

# The tenant a request acts for, set by the hosted server's authentication (comfy_bridge.tenancy).
TENANT_KEY: web.RequestKey = web.RequestKey("tenant", str)


def error_body(type_: str, message: str, details: str = "") -> dict:
    """ComfyUI's error response: {"error": {type, message, details, extra_info}, "node_errors": {}}."""
    return {"error": {"type": type_, "message": message, "details": details, "extra_info": {}}, "node_errors": {}}


async def read_json(request: web.Request, default: Any = ...) -> Any:
    """The body as JSON whatever the Content-Type. Malformed JSON is answered with a 400 in ComfyUI's
    error shape (ComfyUI itself lets it become a 500), or `default` when one is given."""
    raw = await request.read()
    try:
        return json.loads(raw) if raw.strip() else ({} if default is ... else default)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: absurd nesting
        if default is not ...:
            return default
        raise web.HTTPBadRequest(text=json.dumps(error_body("invalid_json", "Invalid JSON in request body",
                                                         str(exc) or type(exc).__name__)),
                                 content_type="application/json") from None


async def read_json_object(request: web.Request) -> dict:
    data = await read_json(request)
    if not isinstance(data, dict):
        raise web.HTTPBadRequest(text=json.dumps(error_body("invalid_json", "Request body must be a JSON object")),
                                 content_type="application/json")
    return data


def query_bool(request: web.Request, name: str, default: bool = False) -> bool:
    value = request.rel_url.query.get(name)
    if value is None:
        return default
    return value.lower() in ("true", "1", "yes")


def query_int(request: web.Request, name: str, default: int | None = None) -> int | None:
    """An integer query parameter; 400 (ComfyUI: 500) when it is not one."""
    value = request.rel_url.query.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise web.HTTPBadRequest(text=json.dumps({"error": f"{name} must be an integer"}),
                                 content_type="application/json") from None
