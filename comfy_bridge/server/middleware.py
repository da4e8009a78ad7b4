"""aiohttp middlewares with ComfyUI's behaviour: cache headers and gzip (Host, Origin and CORS:
web_security); and the answer to a request body that cannot be decoded."""

from __future__ import annotations

import json

from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError

from .common import error_body

_IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


@web.middleware
async def cache_control(request: web.Request, handler):
    """Scripts and index JSON are always revalidated; images may be cached (ComfyUI's rules)."""
    response = await handler(request)
    path = request.path
    last = path.rsplit("/", 1)[-1]
    if path.endswith((".js", ".css")) or (last.startswith("index") and last.endswith(".json")):
        response.headers.setdefault("Cache-Control", "no-cache")
    elif path.lower().endswith(_IMAGE_EXTS):
        if response.status == 404:
            response.headers.setdefault("Cache-Control", "public, max-age=3600")
        elif 200 <= response.status <= 206 or response.status in (301, 308):
            response.headers.setdefault("Cache-Control", "public, max-age=86400")
        elif response.status in (302, 303, 307):
            response.headers.setdefault("Cache-Control", "no-cache")
    return response


@web.middleware
async def compress_body(request: web.Request, handler):
    response = await handler(request)
    if (
        isinstance(response, web.Response)
        and response.content_type in ("application/json", "text/plain")
        and response.body
        and "gzip" in request.headers.get("Accept-Encoding", "")
    ):
        response.enable_compression()
    return response


@web.middleware
async def undecodable_body(request: web.Request, handler):
    """A body aiohttp cannot decode as sent (a Content-Encoding the bytes do not follow, a broken chunked
    transfer) surfaces wherever a route reads it, as RequestPayloadError: that is the client's error, a 400
    naming it, in the /api/v2 envelope there and in ComfyUI's error shape everywhere else."""
    try:
        return await handler(request)
    except RequestPayloadError as exc:
        message = "The request body cannot be decoded as sent (check Content-Encoding and Transfer-Encoding)"
        cause = str(exc.__cause__ or exc).strip() or type(exc).__name__
        if request.path.startswith("/api/v2/"):
            body = {"error": {"code": "invalid_request", "message": message, "details": {"cause": cause}}}
        else:
            body = error_body("invalid_body", message, cause)
        response = web.Response(status=400, text=json.dumps(body), content_type="application/json")
        # The rest of the body cannot be read either: end the connection after this answer, and mark the
        # body as read, or aiohttp's drain of an unread body raises the same error again and drops the
        # connection before the answer is out.
        response.force_close()
        request.content.feed_eof()
        return response
