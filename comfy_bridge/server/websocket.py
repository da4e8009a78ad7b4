"""The websocket at /ws (and /api/ws): connection lifecycle and the binary frame formats.

Frames: text `{"type", "data"}` JSON, or binary = 4-byte big-endian event type + payload
(1 preview image, 3 progress text, 4 preview image with metadata) as ComfyUI sends them.
"""

from __future__ import annotations

import json
import logging
import struct
import uuid
from io import BytesIO
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from comfy_bridge.compat.protocol import BinaryEventTypes

from .common import loads_json

if TYPE_CHECKING:
    from .app import PromptServer

log = logging.getLogger(__name__)

_IMAGE_FORMAT_IDS = {"JPEG": 1, "PNG": 2}


def frame(event: int, payload: bytes) -> bytes:
    return struct.pack(">I", event) + bytes(payload)


def _encode_image(image_type: str, image: Any, max_size: int | None) -> bytes:
    from PIL import Image, ImageOps

    if max_size is not None:
        image = ImageOps.contain(image, (max_size, max_size), Image.Resampling.BILINEAR)
    buf = BytesIO()
    image.save(buf, format=image_type, quality=95, compress_level=1)
    return buf.getvalue()


def preview_frame(preview: tuple) -> bytes:
    """Type 1: format id (1 JPEG, 2 PNG) + encoded image; `preview` = (format, PIL image, max_size)."""
    image_type, image, max_size = preview[:3]
    return frame(
        BinaryEventTypes.PREVIEW_IMAGE,
        struct.pack(">I", _IMAGE_FORMAT_IDS.get(image_type, 1)) + _encode_image(image_type, image, max_size),
    )


def preview_metadata_frame(preview: tuple, metadata: dict | None) -> bytes:
    """Type 4: JSON length + JSON metadata (with image_type) + encoded image."""
    image_type, image, max_size = preview[:3]
    meta = dict(metadata or {})
    meta["image_type"] = "image/png" if image_type == "PNG" else "image/jpeg"
    meta_bytes = json.dumps(meta).encode()
    return frame(
        BinaryEventTypes.PREVIEW_IMAGE_WITH_METADATA,
        struct.pack(">I", len(meta_bytes)) + meta_bytes + _encode_image(image_type, image, max_size),
    )


def text_frame(node_id: str, text: str, prompt_id: str | None = None) -> bytes:
    """Type 3 progress text; the prompt id prefix only for clients that asked for it."""
    node = node_id.encode()
    head = b""
    if prompt_id is not None:
        pid = prompt_id.encode()
        head = struct.pack(">I", len(pid)) + pid
    return frame(BinaryEventTypes.TEXT, head + struct.pack(">I", len(node)) + node + text.encode())


def split_preview_with_metadata(data: Any) -> tuple[tuple, dict | None]:
    """Accept both ((format, image, max_size), metadata) and (format, image, max_size, metadata)."""
    if isinstance(data, (tuple, list)) and len(data) == 2 and isinstance(data[0], (tuple, list)):
        return tuple(data[0]), data[1]
    data = tuple(data)
    return data[:3], (data[3] if len(data) > 3 else None)


def add_routes(routes: web.RouteTableDef, server: PromptServer) -> None:
    @routes.get("/ws")
    async def websocket_handler(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        sid = request.rel_url.query.get("clientId", "") or uuid.uuid4().hex
        # A reconnect under the same id replaces the old registration. On a hosted server the
        # mappings are per tenant (tenancy.sockets), so this never touches another tenant's socket.
        server.sockets[sid] = ws
        server.sockets_metadata[sid] = {"feature_flags": {}}
        try:
            await server.send("status", {"status": server.get_queue_info(), "sid": sid}, sid)
            if server.client_id == sid and server.last_node_id is not None:
                await server.send("executing", {"node": server.last_node_id}, sid)
            first = True
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.ERROR:
                    log.warning("ws connection closed with exception %s", ws.exception())
                elif msg.type == aiohttp.WSMsgType.TEXT:
                    try:
                        data = loads_json(msg.data)
                    except ValueError as exc:  # malformed, or nested past what the parser can follow
                        log.warning("invalid JSON from websocket client %s: %s", sid, exc)
                        # Say so and keep the connection: the client may send a good message next.
                        await server.send("error", {"message": f"Invalid JSON message: {exc}"}, sid)
                        continue
                    # Only the first message may negotiate feature flags (ComfyUI's rule).
                    if first and isinstance(data, dict) and data.get("type") == "feature_flags":
                        flags = data.get("data")
                        server.sockets_metadata[sid]["feature_flags"] = flags if isinstance(flags, dict) else {}
                        await server.send("feature_flags", server.feature_flags(), sid)
                    first = False
        finally:
            # Only drop our own registration: a reconnect may already have replaced it.
            if server.sockets.get(sid) is ws:
                server.sockets.pop(sid, None)
                server.sockets_metadata.pop(sid, None)
        return ws
