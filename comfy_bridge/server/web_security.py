"""Browser-facing defences of the server: the Host allow-list (DNS rebinding), the Origin policy
(CSRF, including `Origin: null` and `Sec-Fetch-Site`), CORS only when configured, and the headers
of files served from the workspace.

ComfyUI's single-user behaviour on loopback is kept: a page from another origin may not drive a
server reached through a loopback name (any method, CVE-2024-10481), and `--enable-cors-header`
switches that guard to CORS. On top of it, on every Host: a state-changing request or a websocket
from a foreign or opaque (`null`) origin is refused whatever credential it carries, since a
browser attaches the session cookie and a page holding a key has no business posting cross-site
unless the operator configured CORS for it.
"""

from __future__ import annotations

import errno
import ipaddress
import mimetypes
import socket
from collections.abc import Awaitable, Callable, Iterable
from urllib.parse import quote, urlsplit

from aiohttp import web

from .config import ServerConfig

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
# Raster images, audio and video render in the browser's own viewer, never as script.
_INLINE_PREFIXES = ("audio/", "video/")
_INLINE_IMAGES = {
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "image/bmp",
    "image/avif",
    "image/x-portable-pixmap",
    "image/x-portable-graymap",
    "image/tiff",
    "image/x-ms-bmp",
}
# A document opened from /view or /userdata runs in an opaque origin with nothing active.
FILE_CSP = "default-src 'none'; img-src 'self' data: blob:; media-src 'self' blob:; style-src 'unsafe-inline'; sandbox"


def _host_port(value: str) -> tuple[str, int | None]:
    parts = urlsplit("//" + value)
    try:
        port = parts.port
    except ValueError:
        port = -1  # not a port: matches nothing
    return (parts.hostname or "").lower().rstrip("."), port


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def is_loopback_name(name: str) -> bool:
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class HostAllowList:
    """Which Host names the server answers. An IP literal cannot be rebound (the page's origin
    would be the address itself) and `localhost` names never leave the machine, so those always
    pass; any other name must be one the server listens on, this machine's own name, or one given
    with --allowed-hosts ("*" disables the check, ".example.com" admits its subdomains)."""

    def __init__(self, names: Iterable[str]):
        self.any = False
        self.exact: set[str] = set()
        self.suffixes: list[str] = []
        for raw in names:
            name = raw.strip().lower().rstrip(".")
            if name == "*":
                self.any = True
            elif name.startswith("."):
                self.suffixes.append(name)
            elif name:
                self.exact.add(_host_port(name)[0] or name)

    @classmethod
    def for_config(cls, config: ServerConfig) -> HostAllowList:
        own = socket.gethostname().lower()
        return cls([*config.addresses, own, own + ".local", *config.allowed_hosts])

    def allows(self, host_header: str | None) -> bool:
        if host_header is None or self.any:
            return True  # HTTP/1.0 clients send none; browsers always do
        name, port = _host_port(host_header)
        if not name or port == -1:
            return False
        if _is_ip(name) or is_loopback_name(name) or name in self.exact:
            return True
        return any(name == s[1:] or name.endswith(s) for s in self.suffixes)


def same_origin(origin: str, host_header: str | None) -> bool:
    """Whether the Origin names this server as the Host header does. A Host without a port (a
    reverse proxy dropped it) is compared by name only."""
    if not host_header or origin == "null":
        return False
    parts = urlsplit(origin)
    try:
        origin_port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return False
    origin_name = (parts.hostname or "").lower().rstrip(".")
    host_name, host_port = _host_port(host_header)
    if not origin_name or host_port == -1:
        return False
    return origin_name == host_name and (host_port is None or host_port == origin_port)


def _cors_origins(value: str | None) -> frozenset[str] | None:
    """--enable-cors-header: None (no CORS), "*" or a comma-separated list of origins."""
    if not value:
        return None
    return frozenset(o.strip().rstrip("/") for o in value.split(",") if o.strip())


class WebSecurity:
    def __init__(self, config: ServerConfig):
        self.hosts = HostAllowList.for_config(config)
        self.cors = _cors_origins(config.enable_cors_header)

    def cors_allows(self, origin: str) -> bool:
        if self.cors is None:
            return False
        if origin in self.cors:
            return True
        return "*" in self.cors and origin != "null"  # "*" still means a real origin

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        host = request.headers.get("Host")
        if not self.hosts.allows(host):
            return web.Response(
                status=403, text="host not allowed: add it with --allowed-hosts (DNS rebinding protection)"
            )
        origin = request.headers.get("Origin")
        if request.method == "OPTIONS":
            return self._with_cors(request, web.Response(), origin)
        refusal = self._refusal(request, host, origin)
        if refusal is not None:
            return web.json_response({"error": f"cross-origin request refused: {refusal}"}, status=403)
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            # Error answers raised by handlers also carry the headers (a CORS client must read them).
            self._with_cors(request, exc, origin)
            exc.headers.setdefault("X-Content-Type-Options", "nosniff")
            raise
        except OSError as exc:
            if exc.errno != errno.ENAMETOOLONG:
                raise
            response = web.Response(status=404)  # e.g. the static route on a name no file can have
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        return self._with_cors(request, response, origin)

    def _refusal(self, request: web.Request, host: str | None, origin: str | None) -> str | None:
        unsafe = request.method not in SAFE_METHODS or request.headers.get("Upgrade", "").lower() == "websocket"
        if origin is not None:
            if same_origin(origin, host) or self.cors_allows(origin):
                return None
            if is_loopback_name(_host_port(host or "")[0]) and self.cors is None:
                return "foreign origin on a loopback server"  # ComfyUI's guard, every method
            return f"origin {origin!r} may not change state" if unsafe else None
        if unsafe and self.cors is None and request.headers.get("Sec-Fetch-Site") in ("cross-site", "same-site"):
            return "Sec-Fetch-Site " + request.headers["Sec-Fetch-Site"]
        return None

    def _with_cors(self, request: web.Request, response: web.StreamResponse, origin: str | None) -> web.StreamResponse:
        if self.cors is None:
            return response
        if self.cors == frozenset({"*"}):
            response.headers["Access-Control-Allow-Origin"] = "*"
        elif origin is not None and self.cors_allows(origin):
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Vary"] = "Origin"
        else:
            return response
        response.headers["Access-Control-Allow-Methods"] = "POST, GET, DELETE, PUT, OPTIONS, PATCH"
        response.headers["Access-Control-Allow-Headers"] = (
            "Content-Type, Authorization, X-API-Key, Idempotency-Key, Range"
        )
        response.headers["Access-Control-Allow-Credentials"] = "true"
        if request.headers.get("Access-Control-Request-Private-Network") == "true":
            response.headers["Access-Control-Allow-Private-Network"] = "true"  # Chrome's PNA preflight
        return response


def served_file_headers(name: str, content_type: str | None = None) -> dict[str, str]:
    """Headers for a workspace file (output, input, upload, user data): the type it is served as
    (anything a browser could run becomes opaque bytes), nosniff, a sandboxing CSP, and an
    attachment disposition for everything but images, audio and video."""
    guessed = content_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
    inline = guessed in _INLINE_IMAGES or guessed.startswith(_INLINE_PREFIXES)
    served = (
        guessed
        if inline or guessed in ("application/json", "text/plain", "text/css", "text/csv")
        else "application/octet-stream"
    )
    # Quotes, controls and non-ASCII would break the header: an ASCII fallback plus RFC 5987's form.
    plain = "".join(c if " " <= c <= "~" and c not in '"\\' else "_" for c in name)
    disposition = f'filename="{plain}"' if inline else f'attachment; filename="{plain}"'
    if plain != name:
        disposition += f"; filename*=UTF-8''{quote(name, safe='')}"
    return {
        "Content-Type": served,
        "Content-Disposition": disposition,
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": FILE_CSP,
    }
