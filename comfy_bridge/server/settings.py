"""GET/POST /settings and /settings/{id}: the user's comfy.settings.json."""

from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from .common import loads_json, read_json, read_json_object
from .userdata import UnknownUser

if TYPE_CHECKING:
    from .app import PromptServer

SETTINGS_FILE = "comfy.settings.json"
_lock = threading.Lock()


def load(path: Path) -> dict:
    """The settings file as a dict; {} when it is missing or unreadable (also when a stored value is nested
    too deeply to parse again, or the bytes are not UTF-8), never an error on every later request."""
    try:
        data = loads_json(path.read_bytes())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def save(path: Path, settings: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(settings, indent=4), encoding="utf-8")
    os.replace(tmp, path)


def add_routes(routes: web.RouteTableDef, server: PromptServer) -> None:
    def settings_path(request: web.Request) -> Path:
        try:
            return server.user_manager.user_root(request) / SETTINGS_FILE
        except UnknownUser:
            # The web UI answers 401 by forgetting its user id and showing the user picker.
            raise web.HTTPUnauthorized() from None

    @routes.get("/settings")
    async def get_settings(request: web.Request) -> web.Response:
        return web.json_response(load(settings_path(request)))

    @routes.get("/settings/{id}")
    async def get_setting(request: web.Request) -> web.Response:
        return web.json_response(load(settings_path(request)).get(request.match_info["id"]))

    @routes.post("/settings")
    async def post_settings(request: web.Request) -> web.Response:
        new = await read_json_object(request)
        path = settings_path(request)
        with _lock:
            save(path, {**load(path), **new})
        return web.Response(status=200)

    @routes.post("/settings/{id}")
    async def post_setting(request: web.Request) -> web.Response:
        value = await read_json(request)
        path = settings_path(request)
        with _lock:
            settings = load(path)
            settings[request.match_info["id"]] = value
            save(path, settings)
        return web.Response(status=200)
