"""GET /view (serve or convert an input/output/temp file) and GET /view_metadata/{folder}."""

from __future__ import annotations

import asyncio
import struct
from io import BytesIO
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from nodes.safe_paths import UnsafePath, check_relative, safe_join
from nodes.workspace import Workspace

from .common import loads_json
from .image_limits import TooManyPixels, open_image
from .web_security import served_file_headers

if TYPE_CHECKING:
    from .app import PromptServer

_ANNOTATIONS = {" [output]": "output", " [input]": "input", " [temp]": "temp"}


def type_dir(ws: Workspace, type_: str) -> Path | None:
    return {"output": ws.output_dir, "input": ws.input_dir, "temp": ws.temp_dir}.get(type_)


def split_annotation(name: str) -> tuple[str, str | None]:
    """ "x.png [output]" -> ("x.png", "output")."""
    for suffix, type_ in _ANNOTATIONS.items():
        if name.endswith(suffix):
            return name[: -len(suffix)], type_
    return name, None


def _converted(path: Path, preview: str | None, channel: str) -> tuple[bytes, str] | None:
    """Re-encode for `preview=fmt;quality` or `channel=rgb|a`; None to send the file as is.
    `channel` is "" when absent: only an explicit alpha request forces webp previews. An image past the
    pixel limit raises TooManyPixels before it is decoded."""
    from PIL import Image

    if preview:
        parts = preview.split(";")
        fmt = parts[0] if parts[0] in ("webp", "jpeg") else "webp"
        if "a" in channel:
            fmt = "webp"
        quality = int(parts[-1]) if parts[-1].isdigit() else 90
        with open_image(path) as img:
            if fmt == "jpeg" or channel == "rgb":
                img = img.convert("RGB")
            buf = BytesIO()
            img.save(buf, format=fmt, quality=quality)
        return buf.getvalue(), f"image/{fmt}"
    if channel == "rgb":
        with open_image(path) as img:
            img = img.convert("RGBA") if img.mode in ("P", "LA", "PA") else img
            buf = BytesIO()
            img.convert("RGB").save(buf, format="PNG")
        return buf.getvalue(), "image/png"
    if channel == "a":
        with open_image(path) as img:
            rgba = img.convert("RGBA") if img.mode not in ("RGBA",) else img
            has_alpha = "A" in img.getbands() or img.mode == "P" and "transparency" in img.info
            alpha = rgba.getchannel("A") if has_alpha else Image.new("L", img.size, 255)
            out = Image.new("RGBA", img.size, (0, 0, 0, 0))
            out.putalpha(alpha)
            buf = BytesIO()
            out.save(buf, format="PNG")
        return buf.getvalue(), "image/png"
    return None


def safetensors_metadata(path: Path) -> dict | None:
    """The `__metadata__` of a safetensors header (at most 1 MB read), or None."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            return None
        length = struct.unpack("<Q", raw)[0]
        if length > 1024 * 1024:
            return None
        header = loads_json(f.read(length))
    meta = header.get("__metadata__") if isinstance(header, dict) else None  # a list or number: no metadata
    return meta if isinstance(meta, dict) else None


def add_routes(routes: web.RouteTableDef, server: PromptServer) -> None:
    ws = server.workspace

    @routes.get("/view")
    async def view_image(request: web.Request) -> web.StreamResponse:
        query = request.rel_url.query
        if "filename" not in query:
            return web.Response(status=404)
        filename, annotated = split_annotation(query["filename"])
        type_ = annotated or query.get("type", "output")
        base = type_dir(ws, type_)
        if base is None:
            return web.Response(status=400)
        try:
            if not filename:
                raise UnsafePath(filename)
            check_relative(filename)
        except UnsafePath:
            return web.Response(status=400)
        try:
            # ComfyUI uses only the file's base name; a subfolder (checked separately) picks the folder.
            path = safe_join(base, query.get("subfolder", ""), Path(filename).name)
        except UnsafePath:
            return web.Response(status=403)
        if not path.is_file():
            return web.Response(status=404)
        try:
            # Off the loop: converting a large image takes a while, and every other request would wait.
            converted = await asyncio.to_thread(_converted, path, query.get("preview"), query.get("channel", ""))
        except TooManyPixels as exc:
            return web.Response(status=400, text=f"Cannot convert {path.name!r}: {exc}")
        except (OSError, ValueError, SyntaxError):  # not an image PIL can read or write that way
            return web.Response(status=400)
        if converted is not None:
            body, content_type = converted
            return web.Response(body=body, headers=served_file_headers(path.name, content_type))
        # SVG, HTML and scripts go out as attachments of opaque bytes, never as active content.
        return web.FileResponse(path, headers=served_file_headers(path.name))

    @routes.get("/view_metadata/{folder_name}")
    async def view_metadata(request: web.Request) -> web.Response:
        filename = request.rel_url.query.get("filename")
        folder = request.match_info["folder_name"]
        if not filename or not filename.endswith(".safetensors") or not ws.folder_paths(folder):
            return web.Response(status=404)
        try:
            check_relative(filename)
        except UnsafePath:
            return web.Response(status=403)
        path = ws.full_path(folder, filename)
        if path is None:
            return web.Response(status=404)
        try:
            meta = safetensors_metadata(path)
        except (OSError, ValueError):
            meta = None
        if meta is None:
            return web.Response(status=404)
        return web.json_response(meta)
