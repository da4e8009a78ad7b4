"""Every route of the real app, read from its aiohttp router (sub-applications, the /api mirror, the
static catch-all and routes added by the hosted server included), so suites that must cover the whole
face cannot fall behind it."""

from __future__ import annotations

from aiohttp import web


def app_routes(app: web.Application) -> list[tuple[str, str]]:
    """(method, path template) of every route, sorted; a static resource is `<prefix>/{filename}`."""
    return sorted({(route.method, template(route.resource)) for route in app.router.routes()})


def template(resource: web.AbstractResource) -> str:
    if isinstance(resource, web.StaticResource):
        return resource.canonical.rstrip("/") + "/{filename}"
    return resource.canonical


async def route_hit(app: web.Application, method: str, url: str) -> tuple[str, str] | None:
    """The (method, path template) of the route that `method url` reaches, None for no route."""
    from aiohttp.test_utils import make_mocked_request

    match = await app.router.resolve(make_mocked_request(method, url, app=app))
    route = match.route
    if route is None or route.resource is None or getattr(match, "http_exception", None) is not None:
        return None
    return route.method, template(route.resource)


def route_key(method: str, path: str, routes: set[tuple[str, str]]) -> tuple[str, str, str]:
    """(method, path, prefix): a HEAD is its GET (aiohttp adds one for every GET route) and an /api
    mirror is the route it mirrors, with prefix "/api"; a route only under /api keeps its path."""
    if method == "HEAD" and ("GET", path) in routes:
        method = "GET"
    if path.startswith("/api/") and (method, path[4:]) in routes:
        return method, path[4:], "/api"
    return method, path, ""
