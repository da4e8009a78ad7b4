"""Comfy API v2 on the hosted server: its service (records in the server's SQLite file), its routes,
the engine messages it listens to, and a retention sweep; the limits of v1 applied to v2 requests."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from aiohttp import web

from comfy_bridge.server import routes_v2_assets, routes_v2_jobs
from comfy_bridge.server.v2_common import error

from .v2_service import V2Service

log = logging.getLogger(__name__)

PURGE_EVERY_S = 60.0
_SERVICE: web.AppKey = web.AppKey("comfy_api_v2", V2Service)


def install(server: Any, db_path: Any) -> V2Service:
    """Serve /api/v2/* on `server` (a TenantPromptServer) with records in `db_path`."""
    service = V2Service(server, db_path)
    service.drop_canceled()
    server.app[_SERVICE] = service
    routes_v2_jobs.add_routes(server.app, server, service)
    routes_v2_assets.add_routes(server.app, server, service)
    server.app.on_startup.append(_start)
    server.app.on_cleanup.append(_stop)
    return service


async def _start(app: web.Application) -> None:
    service = app[_SERVICE]
    service.hub.loop = asyncio.get_running_loop()
    service.sweeper = asyncio.create_task(_sweep(service))


async def _stop(app: web.Application) -> None:
    service = app[_SERVICE]
    service.sweeper.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await service.sweeper
    service.store.close()


async def _sweep(service: V2Service) -> None:
    """Forget the jobs and assets past their retention deadline, every minute."""
    while True:
        try:
            await asyncio.to_thread(service.purge)
        except Exception:
            log.exception("API v2 retention sweep failed")
        await asyncio.sleep(PURGE_EVERY_S)


def refusal(exc: web.HTTPException) -> web.Response:
    """A v1 limit's 413/429/409 in the v2 envelope (429: `queue_full` with Retry-After)."""
    try:
        message = json.loads(exc.text or "")["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = exc.reason
    if exc.status == 429:
        return error(429, "queue_full", message, retry_after=int(exc.headers.get("Retry-After", 5)))
    if exc.status == 413:
        return error(413, "payload_too_large", message)
    return error(exc.status, "invalid_request", message)
