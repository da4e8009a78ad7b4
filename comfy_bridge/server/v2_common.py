"""Shared pieces of the Comfy API v2 routes (/api/v2/*): the error envelope, times, links, the tenant."""

from __future__ import annotations

import datetime as dt
from typing import Any

from aiohttp import web

from .common import TENANT_KEY, dumps_json

PREFIX = "/api/v2"
# Idempotency keys are single use for this long (the contract's 24 h), then forgotten.
IDEMPOTENCY_TTL_S = 24 * 3600
MAX_IDEMPOTENCY_KEY_LEN = 255


def idempotency_key_problem(key: str) -> str | None:
    """What makes an Idempotency-Key header unusable; None when it is a key. Header bytes that are not
    UTF-8 reach us as surrogates, which the store cannot keep."""
    if not 0 < len(key) <= MAX_IDEMPOTENCY_KEY_LEN:
        return f"Idempotency-Key must be 1-{MAX_IDEMPOTENCY_KEY_LEN} characters."
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return "Idempotency-Key must be UTF-8 text."
    return None


def error(
    status: int, code: str, message: str, details: dict | None = None, retry_after: int | None = None
) -> web.Response:
    """The contract's error envelope: {"error": {"code", "message", "details"}}."""
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return web.json_response(
        {"error": {"code": code, "message": message, "details": details}},
        status=status,
        headers=headers,
        dumps=dumps_json,
    )


def not_found(what: str = "job") -> web.Response:
    return error(404, "not_found", f"No such {what}.")


def ok(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=dumps_json)


def iso(ts: float | None) -> str | None:
    """A UNIX time as an RFC 3339 UTC timestamp (None stays None)."""
    if ts is None:
        return None
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat().replace("+00:00", "Z")


def base_url(request: web.Request) -> str:
    """The origin the client reached us on: links in answers are absolute and point back to it, so a
    client (and the SDK, which sends its key only to its own origin) follows them unchanged."""
    return f"{request.scheme}://{request.host}"


def tenant_of(request: web.Request) -> str:
    """The tenant a request acts for; "" on a server with no tenant (the single user's rows)."""
    return request.get(TENANT_KEY) or ""
