"""Small helpers shared by the route modules."""

from __future__ import annotations

import json
import math
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from multidict import MultiDictProxy

# The tenant a request acts for, set by the hosted server's authentication (comfy_bridge.tenancy).
TENANT_KEY: web.RequestKey = web.RequestKey("tenant", str)
# Query integers end up in SQLite (LIMIT/OFFSET), which takes signed 64-bit values only.
QUERY_INT_MAX = 2**63 - 1


def error_body(type_: str, message: str, details: str = "") -> dict:
    """ComfyUI's error response: {"error": {type, message, details, extra_info}, "node_errors": {}}."""
    return {"error": {"type": type_, "message": message, "details": details, "extra_info": {}}, "node_errors": {}}


def bad_request(type_: str, message: str, details: str = "") -> web.HTTPBadRequest:
    return web.HTTPBadRequest(text=json.dumps(error_body(type_, message, details)), content_type="application/json")


def over_limit(status: int, limit: str, allowed: int, message: str) -> web.HTTPException:
    """A 429 (come back later) or 413 (too big) in ComfyUI's error shape, the limit named in the message
    and in extra_info."""
    body = error_body("quota_exceeded", f"{message} (limit {limit} = {allowed})")
    body["error"]["extra_info"] = {"limit": limit, "allowed": allowed}
    if status == 413:
        # aiohttp's 413 wants the sizes; the JSON body carries the real explanation.
        return web.HTTPRequestEntityTooLarge(
            max_size=allowed, actual_size=allowed + 1, text=json.dumps(body), content_type="application/json"
        )
    return web.HTTPTooManyRequests(text=json.dumps(body), content_type="application/json", headers={"Retry-After": "5"})


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses to inf
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def loads_json(raw: bytes | str) -> Any:
    """json.loads that refuses what JSON itself does not allow and Python would let through: NaN,
    Infinity and numbers that overflow to them. Every failure (including absurd nesting, and integers
    longer than Python's int-from-string limit) is a ValueError."""
    try:
        return json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dumps_json(data: Any) -> str:
    """json.dumps that never writes NaN or Infinity (not JSON: browsers' JSON.parse rejects them):
    a non-finite float left in stored data is written as null."""
    try:
        return json.dumps(data, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(data), allow_nan=False)


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=dumps_json)


async def read_json(request: web.Request, default: Any = ...) -> Any:
    """The body as JSON whatever the Content-Type. Malformed JSON is answered with a 400 in ComfyUI's
    error shape (ComfyUI itself lets it become a 500), or `default` when one is given."""
    raw = await request.read()
    try:
        return loads_json(raw) if raw.strip() else ({} if default is ... else default)
    except ValueError as exc:  # includes JSONDecodeError and UnicodeDecodeError
        if default is not ...:
            return default
        raise bad_request("invalid_json", "Invalid JSON in request body", str(exc) or type(exc).__name__) from None


async def read_json_object(request: web.Request) -> dict:
    data = await read_json(request)
    if not isinstance(data, dict):
        raise bad_request("invalid_json", "Request body must be a JSON object")
    return data


def query_bool(request: web.Request, name: str, default: bool = False) -> bool:
    value = request.rel_url.query.get(name)
    if value is None:
        return default
    return value.lower() in ("true", "1", "yes")


def query_int(request: web.Request, name: str, default: int | None = None) -> int | None:
    """An integer query parameter; 400 (ComfyUI: 500) when it is not one or beyond 64 bits."""
    value = request.rel_url.query.get(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:  # also a string beyond Python's int-from-string digit limit
        number = None
    if number is None or abs(number) > QUERY_INT_MAX:
        raise bad_request("invalid_query", f"{name} must be an integer of at most 64 bits", value[:40])
    return number


# What aiohttp raises for a form body it cannot decode: a charset Python does not know (LookupError), an
# unknown Content-Transfer-Encoding or an unusable `_charset_` part (RuntimeError), a malformed multipart
# body (ValueError) or header (HttpProcessingError).
UNDECODABLE_FORM = (ValueError, LookupError, RuntimeError, HttpProcessingError)


async def read_form(request: web.Request) -> MultiDictProxy:
    """The form body (multipart or urlencoded); a body that cannot be decoded is a 400 naming why."""
    try:
        return await request.post()  # bodies above client_max_size raise 413 here
    except UNDECODABLE_FORM as exc:
        raise web.HTTPBadRequest(text=f"Malformed form body: {exc}") from None


def form_text(form: MultiDictProxy, name: str, default: str = "") -> str:
    """A text field of a form; a field sent as a file (any part with a non-text Content-Type) is a 400."""
    value = form.get(name, default)
    if not isinstance(value, str):
        raise web.HTTPBadRequest(
            text=f"Form field {name!r} must be a text part (no file name, a text/* or no Content-Type)"
        )
    return value
