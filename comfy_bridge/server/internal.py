"""The /internal sub-application (web UI only, not mirrored under /api): logs, log subscription,
folder paths and the file lists of input/output/temp."""

from __future__ import annotations

import collections
import logging
import shutil
from datetime import datetime
from typing import TYPE_CHECKING

from aiohttp import web

from .common import read_json_object
from .view import type_dir

if TYPE_CHECKING:
    from .app import PromptServer

LOG_ENTRIES = 300


class LogBuffer(logging.Handler):
    """The last log records for /internal/logs, pushed as `logs` messages to subscribed clients."""

    def __init__(self, server: PromptServer):
        super().__init__(level=logging.INFO)
        self.server = server
        self.entries: collections.deque[dict] = collections.deque(maxlen=LOG_ENTRIES)
        self.subscribers: set[str] = set()

    def install(self) -> None:
        logging.getLogger().addHandler(self)

    def uninstall(self) -> None:
        logging.getLogger().removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            entry = {"t": datetime.fromtimestamp(record.created).isoformat(), "m": self.format(record) + "\n"}
        except Exception:
            return
        self.entries.append(entry)
        # Records about sending itself are not forwarded, so a failing socket cannot feed a loop.
        if record.name.startswith("comfy_bridge.server"):
            return
        for sid in list(self.subscribers):
            self.server.send_sync("logs", {"entries": [entry], "size": terminal_size()}, sid)


def terminal_size() -> dict:
    size = shutil.get_terminal_size()
    return {"cols": size.columns, "rows": size.lines}


def make_app(server: PromptServer) -> web.Application:
    routes = web.RouteTableDef()
    buffer = server.log_buffer

    @routes.get("/logs")
    async def get_logs(request: web.Request) -> web.Response:
        return web.json_response("".join(f"{e['t']} - {e['m']}" for e in buffer.entries))

    @routes.get("/logs/raw")
    async def get_raw_logs(request: web.Request) -> web.Response:
        return web.json_response({"entries": list(buffer.entries), "size": terminal_size()})

    @routes.patch("/logs/subscribe")
    async def subscribe_logs(request: web.Request) -> web.Response:
        body = await read_json_object(request)
        sid = body.get("clientId")
        if isinstance(sid, str):
            (buffer.subscribers.add if body.get("enabled") else buffer.subscribers.discard)(sid)
        return web.Response(status=200)

    @routes.get("/folder_paths")
    async def get_folder_paths(request: web.Request) -> web.Response:
        return web.json_response({k: [str(p) for p in v] for k, v in server.workspace.folders.items()})

    @routes.get("/files/{directory_type}")
    async def get_files(request: web.Request) -> web.Response:
        base = type_dir(server.workspace, request.match_info["directory_type"])
        if base is None:
            return web.json_response({"error": "Invalid directory type"}, status=400)
        if not base.is_dir():
            return web.json_response([])
        files = sorted((p for p in base.iterdir() if p.is_file()), key=lambda p: p.stat().st_mtime, reverse=True)
        return web.json_response([p.name for p in files])

    app = web.Application()
    app.add_routes(routes)
    return app
