"""The model library routes: GET /experiment/models, /experiment/models/{folder},
/experiment/models/preview/{folder}/{path_index}/{filename}."""

from __future__ import annotations

import asyncio
import base64
import os
from io import BytesIO
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from nodes.safe_paths import UnsafePath, safe_join
from nodes.workspace import FOLDER_EXTENSIONS, MODEL_EXTENSIONS

from .common import loads_json
from .image_limits import open_image
from .view import safetensors_metadata

if TYPE_CHECKING:
    from .app import PromptServer

HIDDEN_FOLDERS = ("configs", "custom_nodes")
_PREVIEW_EXTS = (".png", ".jpg", ".jpeg", ".webp", ".gif")


def model_files(folder_key: str, paths: list[Path]) -> list[dict]:
    exts = FOLDER_EXTENSIONS.get(folder_key, MODEL_EXTENSIONS)
    out = []
    for index, base in enumerate(paths):
        if not base.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(base, followlinks=True):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if name.startswith(".") or Path(name).suffix.lower() not in exts:
                    continue
                path = Path(dirpath, name)
                st = path.stat()
                out.append(
                    {
                        "name": path.relative_to(base).as_posix(),
                        "pathIndex": index,
                        "modified": st.st_mtime,
                        "created": st.st_ctime,
                        "size": st.st_size,
                    }
                )
    return out


def _preview_image(model: Path) -> bytes | None:
    """Bytes of <stem>.<img> or <stem>.preview.<img> next to the model, or its ssmd cover image."""
    for ext in _PREVIEW_EXTS:
        for candidate in (model.with_suffix(ext), model.with_name(model.stem + ".preview" + ext)):
            if candidate.is_file():
                return candidate.read_bytes()
    if model.suffix == ".safetensors":
        try:
            meta = safetensors_metadata(model) or {}
            covers = meta.get("ssmd_cover_images")
            if covers:
                first = (covers if isinstance(covers, list) else loads_json(covers))[0]
                return base64.b64decode(first)
        except (OSError, ValueError, IndexError, KeyError, TypeError):  # not a list of base64 strings
            return None
    return None


def _as_webp(data: bytes) -> bytes:
    buf = BytesIO()
    with open_image(data) as img:  # past the pixel limit: TooManyPixels, a ValueError
        img.save(buf, format="WEBP")
    return buf.getvalue()


def add_routes(routes: web.RouteTableDef, server: PromptServer) -> None:
    ws = server.workspace

    @routes.get("/experiment/models")
    async def get_model_folders(request: web.Request) -> web.Response:
        return web.json_response(
            [
                {"name": key, "folders": [str(p) for p in paths]}
                for key, paths in ws.folders.items()
                if key not in HIDDEN_FOLDERS
            ]
        )

    @routes.get("/experiment/models/{folder}")
    async def get_model_files(request: web.Request) -> web.Response:
        folder = request.match_info["folder"]
        if folder not in ws.folders or folder in HIDDEN_FOLDERS:
            return web.Response(status=404)
        return web.json_response(model_files(folder, ws.folder_paths(folder)))

    @routes.get("/experiment/models/preview/{folder}/{path_index}/{filename:.*}")
    async def get_model_preview(request: web.Request) -> web.Response:
        folder = request.match_info["folder"]
        paths = ws.folder_paths(folder) if folder in ws.folders else []
        try:
            base = paths[int(request.match_info["path_index"])]
            model = safe_join(base, request.match_info["filename"])
        except (ValueError, IndexError):
            return web.Response(status=404)
        except UnsafePath:
            return web.Response(status=403)
        data = _preview_image(model) if model.is_file() else None
        if data is None:
            return web.Response(status=404)
        try:
            body = await asyncio.to_thread(_as_webp, data)
        except (OSError, ValueError, SyntaxError) as exc:  # a garbage cover or sibling image (Pillow's errors)
            # Operator- or tenant-placed bytes that are no usable image: no preview, as for a missing one.
            return web.Response(status=404, text=f"The preview of {model.name!r} is not a readable image: {exc}")
        return web.Response(body=body, content_type="image/webp")
