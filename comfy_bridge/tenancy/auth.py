"""Authentication for a hosted server: `Authorization: Bearer KEY` (or `X-API-Key: KEY`, as Comfy
Cloud takes it) for API clients, a login page
that turns a key into an HttpOnly SameSite session cookie for the browser (the web UI and its
websocket then work unchanged), and the per-request tenant scope.

With no tenant in the store the gate is open and changes nothing (ComfyUI's single-user server).
"""

from __future__ import annotations

import asyncio
import html
import time
import unicodedata
from collections.abc import Awaitable, Callable
from urllib.parse import quote, urlsplit

from aiohttp import web

from comfy_bridge.server.common import TENANT_KEY, UNDECODABLE_FORM, error_body, loads_json

from . import tenant_context as context
from .quotas import Quotas
from .store import Store, Tenant

COOKIE = "comfy_cluster_session"
SESSION_TTL_S = 7 * 24 * 3600
OPEN_PATHS = ("/login", "/logout", "/api/v2/health")
V2_PREFIX = "/api/v2/"
# Unicode categories a URL parser may drop or treat as a separator: controls, format characters,
# line and paragraph separators, surrogates, unassigned and private-use code points.
_INVISIBLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Cn", "Co"})
# ASCII punctuation a path and query keep as is (the backslash never gets this far).
_URL_PUNCTUATION = "/?#[]@!$&'()*+,;=:-._~%"
# Process-wide controls and views only an admin tenant may pull: they would drop other tenants'
# work or show the server's log and every tenant's figures.
OPERATOR_PATHS = (
    "/free",
    "/api/free",
    "/internal/logs",
    "/internal/logs/raw",
    "/internal/logs/subscribe",
    "/metrics",
    "/api/metrics",
    "/cluster/stats",
    "/api/cluster/stats",
)
_ACTIVE_TTL_S = 1.0

_LOGIN_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Comfy Cluster: sign in</title>
<style>body{{font-family:sans-serif;background:#202020;color:#ddd;display:flex;justify-content:center;
margin-top:15vh}}form{{display:flex;flex-direction:column;gap:.6em;width:24em}}input{{padding:.5em}}
.err{{color:#f77}}</style></head><body><form method="post" action="login">
<h2>Comfy Cluster</h2><label for="key">API key</label>
<input id="key" name="key" type="password" autocomplete="current-password" autofocus required>
<input type="hidden" name="next" value="{next}"><p class="err">{error}</p>
<button type="submit">Sign in</button></form></body></html>"""


class Gate:
    def __init__(self, store: Store, quotas: Quotas):
        self.store = store
        self.quotas = quotas
        self._active: tuple[float, bool] = (0.0, False)
        self._tenants: dict[str, tuple[float, Tenant | None]] = {}

    def active(self) -> bool:
        """Whether any tenant exists (re-read every second: the CLI may add the first one)."""
        checked, value = self._active
        if time.monotonic() - checked > _ACTIVE_TTL_S:
            value = self.store.has_tenants()
            self._active = (time.monotonic(), value)
        return value

    def tenant(self, name: str) -> Tenant | None:
        """The tenant's record, re-read at most every second (limits changed by the CLI apply within it)."""
        checked, record = self._tenants.get(name, (0.0, None))
        if time.monotonic() - checked > _ACTIVE_TTL_S:
            record = self.store.get_tenant(name)
            self._tenants[name] = (time.monotonic(), record)
        return record

    async def identify(self, request: web.Request) -> tuple[str, str, str] | None:
        """(tenant, how, credential id) from the bearer key or the session cookie."""
        header = request.headers.get("Authorization", "")
        key = header[7:].strip() if header[:7].lower() == "bearer " else request.headers.get("X-API-Key", "").strip()
        if key and not key.isascii():  # keys are ASCII: header bytes that are not UTF-8 arrive as surrogates
            return None
        if key:
            # A key verified before is a cheap lookup on the loop; a first check runs scrypt off it.
            found = self.store.verified_key(key) or await asyncio.get_running_loop().run_in_executor(
                None, self.store.authenticate_key, key
            )
            return (found[0], "key", found[1]) if found else None
        token = request.cookies.get(COOKIE)
        if token and not token.isascii():  # not a token we issued (and not one the store can hash)
            return None
        if token:
            tenant = self.store.session_tenant(token)
            return (tenant, "cookie", "") if tenant else None
        return None

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.method == "OPTIONS" or request.path in OPEN_PATHS or not self.active():
            return await handler(request)
        found = await self.identify(request)
        if found is None:
            return _unauthenticated(request)
        name, how, _ = found
        if (
            how == "cookie"
            and _cross_origin(request)
            and (request.method not in ("GET", "HEAD") or request.headers.get("Upgrade", "").lower() == "websocket")
        ):
            # A cookie rides along with cross-site requests; bearer keys do not.
            return web.json_response({"error": "cross-origin request refused"}, status=403)
        tenant = self.tenant(name)
        if tenant is None:
            return _unauthenticated(request)
        if request.path in OPERATOR_PATHS and not tenant.admin:
            return web.json_response({"error": "operator only: needs an admin tenant's key"}, status=403)
        await self.quotas.check(request, tenant)
        request[TENANT_KEY] = name
        with context.scoped(name):
            return await handler(request)

    # -- login / logout -------------------------------------------------------------------
    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/login", self.login_page)
        app.router.add_post("/login", self.login)
        app.router.add_post("/logout", self.logout)

    async def login_page(self, request: web.Request) -> web.Response:
        return _page(_safe_next(request.rel_url.query.get("next")))

    async def login(self, request: web.Request) -> web.StreamResponse:
        if _cross_origin(request):
            return web.json_response({"error": "cross-origin request refused"}, status=403)
        is_json = request.content_type == "application/json"
        if is_json:
            try:
                data = loads_json(await request.read())
            except ValueError as exc:  # malformed, or nested past the parser's recursion limit
                return web.json_response(
                    error_body("invalid_json", "Invalid JSON in request body", str(exc)), status=400
                )
            data = data if isinstance(data, dict) else {}
        else:
            try:
                data = dict(await request.post())
            except UNDECODABLE_FORM as exc:  # a malformed form body, or one in a charset Python does not know
                return _page(_safe_next(None), f"The form could not be read: {exc}", status=400)
        key, next_ = str(data.get("key", "")), _safe_next(data.get("next"))
        found = (
            await asyncio.get_running_loop().run_in_executor(None, self.store.authenticate_key, key)
            if key.isascii()
            else None
        )  # keys are ASCII; a lone surrogate from JSON is none the store can hash
        if found is None:
            if is_json:
                return web.json_response({"error": "invalid key"}, status=401)
            return _page(next_, "Invalid key.", status=401)
        token = self.store.create_session(found[0], found[1], SESSION_TTL_S)
        response = (
            web.json_response({"tenant": found[0]})
            if is_json
            else web.Response(status=303, headers={"Location": next_})
        )
        response.set_cookie(
            COOKIE, token, max_age=SESSION_TTL_S, path="/", httponly=True, samesite="Strict", secure=request.secure
        )
        return response

    async def logout(self, request: web.Request) -> web.Response:
        token = request.cookies.get(COOKIE)
        if token and token.isascii():
            self.store.delete_session(token)
        response = web.json_response({"ok": True})
        response.del_cookie(COOKIE, path="/")
        return response


def _page(next_: str, error: str = "", status: int = 200) -> web.Response:
    return web.Response(
        text=_LOGIN_PAGE.format(next=html.escape(next_), error=html.escape(error)),
        content_type="text/html",
        status=status,
        headers={
            "Cache-Control": "no-store",
            "X-Frame-Options": "DENY",
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
        },
    )


def _safe_next(value: object) -> str:
    """Only a path on this server (no scheme, no `//host`): the login must not redirect off-site.

    Judged as a browser reads a Location: URL parsers drop tabs and newlines anywhere and trim
    spaces and controls, and read `\\` as `/`, so `/\\t/evil.example` is `//evil.example`. A value
    with any whitespace, control or format character or backslash is refused outright rather than
    cleaned, and whatever is not a plain `/path` falls back to `/`."""
    if not isinstance(value, str) or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    if any(ch.isspace() or unicodedata.category(ch) in _INVISIBLE for ch in value):
        return "/"
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return "/"
    # Non-ASCII goes out percent-encoded, so no header codec or browser reinterprets it.
    return quote(value, safe=_URL_PUNCTUATION)


def _cross_origin(request: web.Request) -> bool:
    origin = request.headers.get("Origin")
    if origin is None:
        return False
    parts = urlsplit(origin)
    return not parts.netloc or parts.netloc.lower() != request.host.lower()


def _unauthenticated(request: web.Request) -> web.StreamResponse:
    if request.path.startswith(V2_PREFIX):  # Comfy API v2's error envelope
        return web.json_response(
            {
                "error": {
                    "code": "unauthorized",
                    "message": "Send your API key as 'Authorization: Bearer <key>' or 'X-API-Key: <key>'.",
                    "details": None,
                }
            },
            status=401,
            headers={"WWW-Authenticate": 'Bearer realm="comfy"'},
        )
    wants_page = (
        request.method == "GET"
        and "text/html" in request.headers.get("Accept", "")
        and request.headers.get("Upgrade", "").lower() != "websocket"
    )
    if wants_page:
        raise web.HTTPSeeOther("/login?next=" + quote(request.path_qs, safe=""))
    return web.json_response(
        {"error": "authentication required: send 'Authorization: Bearer <key>' or sign in at /login"},
        status=401,
        headers={"WWW-Authenticate": 'Bearer realm="comfy"'},
    )
