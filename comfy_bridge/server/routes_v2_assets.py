"""Comfy API v2 assets: POST /api/v2/assets (multipart upload, hashed with blake3 as it streams in; a
`models/<folder>/<name>.safetensors` file_path puts a checked safetensors file in the tenant's model folder),
POST /api/v2/assets/from-hash, HEAD /api/v2/assets/by-hash/{hash}, GET and DELETE
/api/v2/assets/{id}, and GET /api/v2/assets/{id}/content (range requests: 206 and 416)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import blake3
from aiohttp import BodyPartReader, web

from comfy_bridge.tenancy.v2_assets import (
    BadPath,
    Clobber,
    delete_asset,
    input_name,
    mint_from_hash,
    model_target,
    safetensors_problem,
    store_model,
    store_upload,
)
from comfy_bridge.tenancy.v2_views import asset_json

from .common import UNDECODABLE_FORM, loads_json
from .image_limits import pixels_problem
from .v2_common import IDEMPOTENCY_TTL_S, PREFIX, base_url, error, idempotency_key_problem, not_found, ok, tenant_of
from .web_security import served_file_headers

if TYPE_CHECKING:
    from comfy_bridge.tenancy.v2_service import V2Service

CHUNK = 1 << 16
UPLOADS_DIR = ".v2-uploads"
MIN_EXPIRES_IN, MAX_EXPIRES_IN = 60, 7 * 24 * 3600
IDENTITY_ENCODINGS = ("binary", "8bit", "7bit")
_HASH = re.compile(r"^blake3:[0-9a-f]{64}$")


def expires_from(value: Any) -> tuple[float | None, str | None]:
    """(the retention deadline an `expires_in` asks for, or the problem with it); None: never."""
    if value is None or value == "":
        return None, None
    try:
        seconds = int(value)
    except (TypeError, ValueError):
        seconds = 0
    if isinstance(value, bool) or not MIN_EXPIRES_IN <= seconds <= MAX_EXPIRES_IN:
        return None, f"expires_in must be an integer from {MIN_EXPIRES_IN} to {MAX_EXPIRES_IN} seconds"
    return time.time() + seconds, None


def add_routes(app: web.Application, server: Any, service: V2Service) -> None:
    store = service.store

    async def upload(request: web.Request) -> web.Response:
        tenant = tenant_of(request)
        if not request.content_type.startswith("multipart/"):
            return error(422, "invalid_request", "Send multipart/form-data with file, content_type and file_path.")
        cap = server.v2_upload_limit(request)
        # Received beside the tenants' folders, not in one (a half-received upload is not stored bytes of the
        # tenant's), on the workspace's file system so that placing it is a link.
        folder = server.workspace.root / UPLOADS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=folder, prefix="upload-")
        tmp = Path(tmp_name)
        fields: dict[str, str] = {}
        tags: list[str] = []
        digest, size, got_file = blake3.blake3(), 0, False
        try:
            with os.fdopen(fd, "wb") as out:
                try:
                    async for part in await request.multipart():
                        if not isinstance(part, BodyPartReader) or part.name is None:
                            continue
                        if part.name == "file":
                            encoding = part.headers.get("Content-Transfer-Encoding", "binary").lower()
                            if encoding not in IDENTITY_ENCODINGS:  # read_chunk gives the bytes as sent
                                return error(
                                    422,
                                    "invalid_request",
                                    f"The file part's Content-Transfer-Encoding "
                                    f"{encoding[:40]!r} is not supported; send "
                                    "the bytes as they are (binary).",
                                )
                            got_file = True
                            fields.setdefault("part_type", part.headers.get("Content-Type", ""))
                            while chunk := await part.read_chunk(CHUNK):
                                size += len(chunk)
                                if cap is not None and size > cap:
                                    return error(413, "payload_too_large", f"The upload is over {cap} bytes.")
                                digest.update(chunk)
                                out.write(chunk)
                        elif part.name == "tags":
                            tags.append((await part.text()).strip())
                        else:
                            fields[part.name] = (await part.text()).strip()
                except UNDECODABLE_FORM as exc:  # a charset or transfer encoding aiohttp cannot decode
                    return error(422, "invalid_request", f"Malformed multipart body: {exc}")
            if not got_file:
                return error(422, "invalid_request", "Missing the 'file' part.")
            file_path = fields.get("file_path", "")
            try:
                model = model_target(file_path)
                if model is None:
                    input_name(file_path)
            except BadPath as exc:
                return error(422, "invalid_request", str(exc))
            if model is not None and (problem := await asyncio.to_thread(safetensors_problem, tmp)) is not None:
                return error(422, "invalid_request", f"Not a safetensors file: {problem}.")
            if model is None and (problem := await asyncio.to_thread(pixels_problem, tmp)) is not None:
                return error(422, "invalid_request", f"Refused image: {problem}.")
            hash_ = "blake3:" + digest.hexdigest()
            expected = fields.get("expected_hash")
            if expected and expected.lower() != hash_:
                return error(409, "hash_mismatch", "expected_hash does not match the received bytes.")
            expires, problem = expires_from(fields.get("expires_in"))
            if problem is not None:
                return error(422, "invalid_request", problem)
            refusal = server.v2_storage_refusal(request, size)
            if refusal is not None:
                return refusal
            key = request.headers.get("Idempotency-Key")
            if key is not None and (problem := idempotency_key_problem(key)) is not None:
                return error(400, "invalid_request", problem)
            if key is not None and (not await asyncio.to_thread(store.claim, tenant, "assets", key, IDEMPOTENCY_TTL_S)):
                return error(422, "idempotency_key_reuse", "This Idempotency-Key was used already.")
            content_type = fields.get("content_type") or fields.get("part_type") or "application/octet-stream"
            if model is not None:
                try:
                    row, new = await asyncio.to_thread(
                        store_model, service, tenant, tmp, hash_, size, content_type, file_path, *model, tags, expires
                    )
                except Clobber as exc:  # nothing was created: the key may be used again
                    if key is not None:
                        await asyncio.to_thread(store.release, tenant, "assets", key)
                    return error(409, "hash_mismatch", str(exc))
            else:
                row, new = await asyncio.to_thread(
                    store_upload, service, tenant, tmp, hash_, size, content_type, file_path, tags, expires
                )
            return ok(asset_json(row, base_url(request), time.time(), created_new=new), status=201 if new else 200)
        except ValueError as exc:  # a malformed multipart body
            return error(422, "invalid_request", f"Malformed multipart body: {exc}")
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()

    async def from_hash(request: web.Request) -> web.Response:
        try:
            body = loads_json(await request.read())
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("hash"), str):
            return error(422, "invalid_request", 'Send {"hash": "blake3:<hex>"}.')
        file_path = body.get("file_path")
        if file_path is not None:
            try:
                input_name(file_path)
            except BadPath as exc:
                return error(422, "invalid_request", str(exc))
        tags = body.get("tags") or []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            return error(422, "invalid_request", "tags must be a list of strings.")
        expires, problem = expires_from(body.get("expires_in"))
        if problem is not None:
            return error(422, "invalid_request", problem)
        found = await asyncio.to_thread(
            mint_from_hash, service, tenant_of(request), body["hash"].lower(), file_path, tags, expires
        )
        if found is None:
            return error(404, "blob_not_found", "No bytes with this hash that you may use.")
        row, new = found
        return ok(asset_json(row, base_url(request), time.time(), created_new=False), status=201 if new else 200)

    async def head_by_hash(request: web.Request) -> web.Response:
        hash_ = request.match_info["hash"].lower()
        row = (
            await asyncio.to_thread(store.asset_by_hash, tenant_of(request), hash_, time.time())
            if _HASH.match(hash_)
            else None
        )
        found = row is not None and await asyncio.to_thread(service.asset_path, row) is not None
        return web.Response(status=200 if found else 404)

    async def get_asset(request: web.Request) -> web.Response:
        row = await asyncio.to_thread(store.asset, tenant_of(request), request.match_info["id"], time.time())
        return ok(asset_json(row, base_url(request), time.time())) if row is not None else not_found("asset")

    async def remove(request: web.Request) -> web.Response:
        outcome = await asyncio.to_thread(delete_asset, service, tenant_of(request), request.match_info["id"])
        if outcome == "not_found":
            return not_found("asset")
        if outcome == "in_use":
            return error(409, "asset_in_use", "This asset cannot be deleted now.")
        return web.Response(status=204)

    async def content(request: web.Request) -> web.StreamResponse:
        row = await asyncio.to_thread(store.asset, tenant_of(request), request.match_info["id"], time.time())
        path = await asyncio.to_thread(service.asset_path, row) if row is not None else None
        if path is None:
            return not_found("asset")
        # aiohttp's FileResponse answers Range with 206 and an unsatisfiable one with 416.
        return web.FileResponse(path, headers=served_file_headers(os.path.basename(row["name"]), row["content_type"]))

    app.router.add_post(PREFIX + "/assets", upload)
    app.router.add_post(PREFIX + "/assets/from-hash", from_hash)
    app.router.add_route("HEAD", PREFIX + "/assets/by-hash/{hash}", head_by_hash)
    app.router.add_get(PREFIX + "/assets/{id}", get_asset, allow_head=False)
    app.router.add_delete(PREFIX + "/assets/{id}", remove)
    app.router.add_get(PREFIX + "/assets/{id}/content", content)
