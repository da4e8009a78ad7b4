"""POST /upload/image and POST /upload/mask (multipart), with ComfyUI's naming rules: an existing
name with the same content is reused, a different content gets "name (1).ext", "name (2).ext", ..."""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from nodes.safe_paths import UnsafePath, safe_join

from .common import form_text, loads_json, read_form
from .image_limits import open_image, pixels_problem
from .view import split_annotation, type_dir

if TYPE_CHECKING:
    from .app import PromptServer


def _digest(data: bytes | Path, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    if isinstance(data, Path):
        with open(data, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    else:
        h.update(data)
    return h.hexdigest()


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".upload-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _merge_mask(original: Path, mask_bytes: bytes, target: Path) -> None:
    """The original image with its alpha replaced by the uploaded mask's alpha; PNG text kept."""
    from io import BytesIO

    from PIL.PngImagePlugin import PngInfo

    with open_image(original) as img:
        info = PngInfo()
        for key, value in getattr(img, "text", {}).items():
            info.add_text(key, value)
        rgba = img.convert("RGBA")
    with open_image(mask_bytes) as mask:
        rgba.putalpha(mask.convert("RGBA").getchannel("A"))
    buf = BytesIO()
    rgba.save(buf, format="PNG", pnginfo=info, compress_level=4)
    _write_atomic(target, buf.getvalue())


def add_routes(routes: web.RouteTableDef, server: PromptServer) -> None:
    ws = server.workspace
    algorithm = server.config.default_hashing_function

    async def handle_upload(
        request: web.Request, save: Callable[[bytes, dict, Path], None] | None = None
    ) -> web.Response:
        post = await read_form(request)  # ComfyUI: 500 for a body it cannot decode
        image = post.get("image")
        if image is None or not hasattr(image, "file"):
            return web.Response(status=400)
        filename = image.filename or ""
        type_ = form_text(post, "type") or "input"
        subfolder = form_text(post, "subfolder")
        overwrite = form_text(post, "overwrite").lower() in ("true", "1")
        form_text(post, "original_ref")  # read by the mask's save: text or a 400 before anything is written
        base = type_dir(ws, type_)
        if base is None or not filename:
            return web.Response(status=400)
        try:
            folder = safe_join(base, subfolder)
            target = safe_join(folder, filename)
        except UnsafePath:
            return web.Response(status=400)
        if target.parent != folder:  # the name itself may not carry directories
            return web.Response(status=400)
        data = image.file.read()
        problem = await asyncio.to_thread(pixels_problem, data)  # only the header is read
        if problem is not None:
            return web.Response(status=400, text=f"Refused {filename!r}: {problem}")
        folder.mkdir(parents=True, exist_ok=True)
        if overwrite and target.is_dir():  # a file cannot replace a folder
            return web.Response(status=400)
        duplicate = False
        if not overwrite:
            stem, ext = os.path.splitext(filename)
            digest = None
            i = 1
            while target.exists():
                digest = digest or _digest(data, algorithm)
                if target.is_file() and _digest(target, algorithm) == digest:
                    duplicate = True
                    break
                filename = f"{stem} ({i}){ext}"
                target = folder / filename
                i += 1
        if not duplicate:
            if save is not None:
                save(data, post, target)
            else:
                _write_atomic(target, data)
        return web.json_response({"name": filename, "subfolder": subfolder, "type": type_})

    @routes.post("/upload/image")
    async def upload_image(request: web.Request) -> web.Response:
        return await handle_upload(request)

    @routes.post("/upload/mask")
    async def upload_mask(request: web.Request) -> web.Response:
        def save(data: bytes, post: dict, target: Path) -> None:
            try:
                ref = loads_json(post.get("original_ref") or "")
                name, annotated = split_annotation(ref["filename"])
                base = type_dir(ws, annotated or ref.get("type", "output"))
                original = safe_join(base, ref.get("subfolder", "") or "", name) if base else None
            except (ValueError, KeyError, TypeError, AttributeError, UnsafePath):  # not a {filename, ...} of strings
                original = None
            # Like ComfyUI, a bad reference silently skips the save; the name is still answered.
            if original is not None and original.is_file():
                try:
                    _merge_mask(original, data, target)
                except (OSError, ValueError) as e:  # PIL: not an image (UnidentifiedImageError is an OSError)
                    raise web.HTTPBadRequest(text=f"cannot merge the mask into {ref['filename']!r}: {e}") from None

        return await handle_upload(request, save)
