"""The web UI: index.html at /, the frontend's static files, custom node web directories
(/extensions/<pack>/...), custom node example workflows, user.css, the workflow templates (templates.py) and
the optional docs package."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from nodes.safe_paths import UnsafePath, safe_join

from . import templates
from .custom_node_files import example_workflow_dirs

if TYPE_CHECKING:
    from .app import PromptServer

log = logging.getLogger(__name__)


def _package_dir(module: str, sub: str) -> Path | None:
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return None
    path = Path(mod.__file__).parent / sub
    return path if path.is_dir() else None


def resolve_web_root(front_end_root: Path | str | None) -> Path:
    """`front_end_root` if given, else the installed comfyui_frontend_package's static folder."""
    if front_end_root is not None:
        root = Path(front_end_root).resolve()
        if not root.is_dir():
            raise FileNotFoundError(f"front_end_root {root} is not a directory")
        return root
    root = _package_dir("comfyui_frontend_package", "static")
    if root is None:
        raise RuntimeError("comfyui-frontend-package is not installed; install it or set front_end_root")
    return root


def add_routes(routes: web.RouteTableDef, server: PromptServer) -> None:
    @routes.get("/")
    async def get_root(request: web.Request) -> web.StreamResponse:
        response = web.FileResponse(server.web_root / "index.html")
        response.headers["Cache-Control"] = "no-cache"
        response.headers["Pragma"] = "no-cache"
        response.headers["Expires"] = "0"
        return response


def _folder_handler(lookup: Callable[[str], Path | None]):
    """GET handler for <prefix>/{name}/{path}: serves `path` inside the folder `lookup(name)` returns.
    aiohttp's static routes cannot match folder names that need URL quoting (spaces), hence a handler."""

    async def handler(request: web.Request) -> web.StreamResponse:
        base = lookup(request.match_info["name"])
        if base is None:
            return web.Response(status=404)
        try:
            path = safe_join(base, request.match_info["path"])
        except UnsafePath:
            return web.Response(status=403)
        if not path.is_file():
            return web.Response(status=404)
        return web.FileResponse(path)

    return handler


def _user_css(web_root: Path):
    """index.html links `user.css` beside it (the old frontend shipped one in its web root): a web root
    that has one serves it, else an empty stylesheet answers, so the page does not log a failed load."""

    async def handler(request: web.Request) -> web.StreamResponse:
        path = web_root / "user.css"
        if path.is_file():
            return web.FileResponse(path, headers={"Content-Type": "text/css"})
        return web.Response(body=b"", content_type="text/css")

    return handler


def add_static_routes(app: web.Application, server: PromptServer) -> None:
    """Static routes come last: the web root catches every path no other route matched."""
    web_dirs = {name: Path(d) for name, d in getattr(server.registry, "web_directories", {}).items()}
    core_extensions = server.web_root / "extensions"

    def extension_dir(name: str) -> Path | None:
        # A pack's web directory, else the frontend's own extensions/<name> (e.g. extensions/core).
        if name in web_dirs:
            return web_dirs[name]
        try:
            return safe_join(core_extensions, name)
        except UnsafePath:
            return None

    examples = example_workflow_dirs(server.workspace)
    app.router.add_get("/extensions/{name}/{path:.*}", _folder_handler(extension_dir))
    app.router.add_get("/api/workflow_templates/{name}/{path:.*}", _folder_handler(examples.get))
    app.router.add_get("/user.css", _user_css(server.web_root))
    templates.add_static_routes(app)
    statics: list[web.AbstractRouteDef] = []
    docs = _package_dir("comfyui_embedded_docs", "docs")
    if docs is not None:
        statics.append(web.static("/docs", docs))
    statics.append(web.static("/", server.web_root))
    app.add_routes(statics)
