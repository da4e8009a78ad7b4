"""Users and per-user files: GET/POST /users, GET /userdata, GET /v2/userdata,
GET/POST/DELETE /userdata/{file}, POST /userdata/{file}/move/{dest}.

Each user's files live in <user_dir>/<user_id>; the id is "default" unless multi-user mode picks
it from the comfy-user header. `{file}` is one URL segment: clients encode "/" as %2F."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from aiohttp import web

from nodes.output_claims import write_atomic
from nodes.safe_paths import UnsafePath, safe_join

from .common import query_bool, read_json
from .web_security import served_file_headers

if TYPE_CHECKING:
    from .app import PromptServer

DEFAULT_USER = "default"

# Folders the web UI lists at every start (saved workflows, subgraph blueprints): one a user has not
# written to yet lists as empty, as it does in ComfyUI once it exists, instead of "Directory not found".
STANDARD_FOLDERS = frozenset({"workflows", "subgraphs"})
# Files the web UI loads at every start, with what an absent one means to it: index.html links the
# user's stylesheet, and the node-templates extension reads its list (for it, 404 and [] mean the same).
DEFAULT_FILES = {"user.css": (b"", "text/css"), "comfy.templates.json": (b"[]", "application/json")}


class UnknownUser(KeyError):
    pass


class UserManager:
    def __init__(self, user_dir: Path, multi_user: bool):
        self.user_dir = Path(user_dir)
        self.multi_user = multi_user
        self._lock = threading.Lock()

    @property
    def _users_file(self) -> Path:
        return self.user_dir / "users.json"

    def users(self) -> dict[str, str]:
        try:
            data = json.loads(self._users_file.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else {}
        except (OSError, json.JSONDecodeError):
            return {}

    def create_user(self, name: str) -> str:
        with self._lock:
            users = self.users()
            if name in users.values():
                raise ValueError("Duplicate username.")
            user_id = re.sub(r"[^a-zA-Z0-9-_]+", "-", name) + "_" + str(uuid.uuid4())
            users[user_id] = name
            self.user_dir.mkdir(parents=True, exist_ok=True)
            write_atomic(self._users_file, lambda tmp: Path(tmp).write_text(json.dumps(users), encoding="utf-8"))
        return user_id

    def user_id(self, request: web.Request) -> str:
        user = DEFAULT_USER
        if self.multi_user and "comfy-user" in request.headers:
            user = request.headers["comfy-user"]
            if user not in self.users():
                raise UnknownUser(user)
        return user

    def user_root(self, request: web.Request) -> Path:
        # The id becomes a folder name, so it goes through the same traversal checks as paths.
        return safe_join(self.user_dir, self.user_id(request))

    def resolve(self, request: web.Request, relative: str) -> Path:
        """A path in the requesting user's folder; UnsafePath when it would leave it."""
        return safe_join(self.user_root(request), relative)


def _info(path: Path, root: Path) -> dict:
    st = path.stat()
    return {
        "path": path.relative_to(root).as_posix(),
        "size": st.st_size,
        "modified": st.st_mtime,
        "created": st.st_ctime,
    }


def _list_files(base: Path, recurse: bool) -> list[Path]:
    if recurse:
        return sorted(p for p in base.rglob("*") if p.is_file())
    return sorted(p for p in base.iterdir() if p.is_file())


def add_routes(routes: web.RouteTableDef, server: PromptServer) -> None:
    users = server.user_manager

    def guarded(status_unknown: int = 403):
        """Map traversal to 403 and unknown users to `status_unknown` for the wrapped handler."""

        def wrap(handler):
            async def inner(request: web.Request) -> web.StreamResponse:
                try:
                    return await handler(request)
                except UnsafePath:
                    return web.Response(status=403, text="Forbidden")
                except UnknownUser:
                    return web.json_response({"error": "Unknown user"}, status=status_unknown)

            inner.__name__ = handler.__name__
            return inner

        return wrap

    def file_param(request: web.Request, name: str) -> Path:
        # Segments arrive %2F-encoded; decode once, as ComfyUI does, then apply the traversal checks.
        raw = unquote(request.match_info[name])
        if not raw:
            raise web.HTTPBadRequest(text="Invalid path")
        return users.resolve(request, raw)

    def respond_path(request: web.Request, path: Path) -> web.Response:
        root = users.user_root(request)
        if query_bool(request, "full_info"):
            return web.json_response(_info(path, root))
        return web.json_response(path.relative_to(root).as_posix())

    @routes.get("/users")
    async def get_users(request: web.Request) -> web.Response:
        if users.multi_user:
            return web.json_response({"storage": "server", "users": users.users()})
        return web.json_response({"storage": "server", "migrated": (users.user_dir / DEFAULT_USER).is_dir()})

    @routes.post("/users")
    async def post_users(request: web.Request) -> web.Response:
        body = await read_json(request)
        name = body.get("username") if isinstance(body, dict) else None
        if not isinstance(name, str) or not name.strip():
            return web.json_response({"error": "Username required."}, status=400)
        try:
            return web.json_response(users.create_user(name.strip()))
        except ValueError as exc:
            return web.json_response({"error": str(exc)}, status=400)

    @routes.get("/userdata")
    @guarded()
    async def list_userdata(request: web.Request) -> web.Response:
        directory = request.rel_url.query.get("dir", "")
        if not directory:
            return web.Response(status=400, text="Directory not provided")
        base = users.resolve(request, directory)
        if not base.is_dir():
            if directory.strip("/") in STANDARD_FOLDERS and not base.exists():
                return web.json_response([])
            return web.Response(status=404, text="Directory not found")
        files = _list_files(base, query_bool(request, "recurse"))
        if query_bool(request, "full_info"):
            return web.json_response([_info(p, base) for p in files])
        rel = [p.relative_to(base).as_posix() for p in files]
        if query_bool(request, "split"):
            return web.json_response([[r, *r.split("/")] for r in rel])
        return web.json_response(rel)

    @routes.get("/v2/userdata")
    @guarded()
    async def list_userdata_v2(request: web.Request) -> web.Response:
        root = users.user_root(request)
        if not root.is_dir():
            return web.json_response([])
        sub = request.rel_url.query.get("path", "")
        base = safe_join(root, sub) if sub else root
        if not base.exists():
            return web.json_response({"error": "Path not found"}, status=404)
        if not base.is_dir():
            return web.json_response({"error": "Path is not a directory"}, status=400)
        entries = []
        for path in base.rglob("*"):
            rel = path.relative_to(root).as_posix()
            if path.is_dir():
                entries.append({"name": path.name, "path": rel, "type": "directory"})
            elif path.is_file():
                st = path.stat()
                entries.append(
                    {"name": path.name, "path": rel, "type": "file", "size": st.st_size, "modified": st.st_mtime}
                )
        entries.sort(key=lambda e: (e["type"] != "directory", e["name"].lower()))
        return web.json_response(entries)

    @routes.get("/userdata/{file}")
    @guarded()
    async def get_userdata(request: web.Request) -> web.StreamResponse:
        path = file_param(request, "file")
        if not path.is_file():
            name = path.relative_to(users.user_root(request)).as_posix()
            if name in DEFAULT_FILES and not path.exists():
                body, content_type = DEFAULT_FILES[name]
                return web.Response(body=body, headers=served_file_headers(name, content_type))
            return web.Response(status=404)
        return web.FileResponse(path, headers=served_file_headers(path.name))  # never sniffed or run

    @routes.post("/userdata/{file}")
    @guarded()
    async def post_userdata(request: web.Request) -> web.Response:
        path = file_param(request, "file")
        overwrite = query_bool(request, "overwrite", True)
        if path.exists() and not overwrite:
            return web.Response(status=409, text="File already exists")
        if path.is_dir():
            return web.Response(status=400, text="Path is a directory")
        body = await request.read()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
            tmp.write_bytes(body)
            os.replace(tmp, path)
        except OSError as exc:
            return web.Response(status=400, text=str(exc))
        return respond_path(request, path)

    @routes.delete("/userdata/{file}")
    @guarded()
    async def delete_userdata(request: web.Request) -> web.Response:
        path = file_param(request, "file")
        if not path.is_file():
            return web.Response(status=404)
        path.unlink()
        return web.Response(status=204)

    @routes.post("/userdata/{file}/move/{dest}")
    @guarded()
    async def move_userdata(request: web.Request) -> web.Response:
        source = file_param(request, "file")
        dest = file_param(request, "dest")
        if not source.is_file():
            return web.Response(status=404)
        if dest.exists() and not query_bool(request, "overwrite", True):
            return web.Response(status=409, text="File already exists")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(source, dest)
        return respond_path(request, dest)
