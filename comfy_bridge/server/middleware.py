"""aiohttp middlewares with ComfyUI's behaviour: cache headers, gzip, CORS or the origin guard."""
from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from aiohttp import web

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
    if (isinstance(response, web.Response) and response.content_type in ("application/json", "text/plain")
            and response.body and "gzip" in request.headers.get("Accept-Encoding", "")):
        response.enable_compression()
    return response


def cors(allowed_origin: str):
    @web.middleware
    async def cors_middleware(request: web.Request, handler):
        response = web.Response() if request.method == "OPTIONS" else await handler(request)
        response.headers["Access-Control-Allow-Origin"] = allowed_origin
        response.headers["Access-Control-Allow-Methods"] = "POST, GET, DELETE, PUT, OPTIONS, PATCH"
        response.headers["Access-Control-Allow-Headers"] = "Content-Type, Authorization"
        response.headers["Access-Control-Allow-Credentials"] = "true"
        return response
    return cors_middleware


def _split_host(value: str) -> tuple[str, int | None]:
    parts = urlsplit("//" + value)
    try:
        return (parts.hostname or "").lower(), parts.port
    except ValueError:
        return (parts.hostname or "").lower(), None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@web.middleware
async def origin_guard(request: web.Request, handler):
    """Without CORS, a browser page from another origin may not drive a server bound to loopback
    (blocks drive-by requests from web pages to a local ComfyUI)."""
    if request.method == "OPTIONS":
        return web.Response()
    host, origin = request.headers.get("Host"), request.headers.get("Origin")
    if host and origin:
        host_name, host_port = _split_host(host)
        origin_parts = urlsplit(origin)
        origin_name = (origin_parts.hostname or "").lower()
        try:
            origin_port = origin_parts.port
        except ValueError:
            origin_port = None
        if _is_loopback(host_name):
            if host_port is None or origin_port is None:
                same = host_name == origin_name
            else:
                same = (host_name, host_port) == (origin_name, origin_port)
            if not same:
                return web.Response(status=403)
    return await handler(request)
