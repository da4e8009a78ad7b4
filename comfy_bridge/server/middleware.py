"""aiohttp middlewares with ComfyUI's behaviour: cache headers and gzip (Host, Origin and CORS:
web_security)."""
from __future__ import annotations

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
