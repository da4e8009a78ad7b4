"""The local assets API of today's ComfyUI (its app/assets routes), over this workspace's model, input and
output folders: GET /assets (tag and name filters, offset or cursor pages), HEAD /assets/hash/{hash},
GET/PUT/DELETE /assets/{id}, GET /assets/{id}/content, POST /assets (multipart upload), POST
/assets/from-hash, POST/DELETE /assets/{id}/tags, GET /tags, GET /assets/tags/refine, POST /assets/seed,
GET /assets/seed/status and POST /assets/prune. Each request acts for its tenant (see asset_index)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import blake3
from aiohttp import BodyPartReader, web
from pydantic import ValidationError

from comfy_bridge.tenancy import tenant_context as context
from comfy_bridge.tenancy.v2_assets import place_upload, safetensors_problem

from .asset_index import LISTED, MODEL_TYPE, ROOTS, AssetIndex, FileFacts, model_folders, new_record, roots_for, tags_of
from .asset_requests import (
    CURSOR_SORTS,
    HASH_RE,
    SYSTEM_TAGS,
    UUID_RE,
    FromHashBody,
    InvalidCursor,
    ListQuery,
    RefineQuery,
    TagsBody,
    TagsQuery,
    UpdateBody,
    UploadSpec,
    asset_json,
    decode_cursor,
    encode_cursor,
    error,
    invalid,
    query_dict,
)
from .common import TENANT_KEY, UNDECODABLE_FORM, dumps_json, loads_json
from .image_limits import pixels_problem
from .web_security import served_file_headers

if TYPE_CHECKING:
    from .app import PromptServer

INDEX_FILE = "assets.sqlite3"
UPLOADS_DIR = ".assets-uploads"
CHUNK = 1 << 16
SEED_EVENTS = ("assets.seed.fast_complete", "assets.seed.completed")  # the web UI refreshes on either
JOB_LOOKUP = 256  # newest history entries searched for the prompt that made a new output file
UUID_MATCH = re.compile(f"^{UUID_RE}$")
SUFFIX = re.compile(r"^\.[a-z0-9_-]{1,16}$")
_SORT_KEYS = {
    "name": lambda r: r["name"].lower(),
    "created_at": lambda r: r["created"],
    "updated_at": lambda r: r["updated"],
    "size": lambda r: r["size"],
    "last_access_time": lambda r: r["accessed"],
}


def suffix_of(filename: str) -> str:
    """The extension a stored upload keeps (its name is its hash): a plain one, else none."""
    suffix = Path(filename.replace("\\", "/")).suffix.lower()
    return suffix if SUFFIX.match(suffix) else ""


def _tenant(request: web.Request) -> str:
    return request.get(TENANT_KEY) or ""


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=dumps_json)


def _not_found(asset_id: str) -> web.Response:
    return error(404, "ASSET_NOT_FOUND", f"Asset {asset_id} not found.", {"id": asset_id})


async def _body(request: web.Request) -> tuple[Any, web.Response | None]:
    try:
        return loads_json(await request.read()), None
    except ValueError:
        return None, error(400, "INVALID_JSON", "Request body must be valid JSON.")


def add_routes(routes: web.RouteTableDef, server: PromptServer) -> None:
    def gated(register: Any) -> Any:
        """`routes.get` and the others, the handler answering 503 while the server runs with
        --disable-assets, as ComfyUI's asset routes do when its asset system is off."""

        def on(path: str) -> Any:
            def decorate(handler: Any) -> Any:
                @functools.wraps(handler)
                async def checked(request: web.Request) -> web.StreamResponse:
                    if server.config.disable_assets:
                        return error(
                            503,
                            "SERVICE_DISABLED",
                            "The assets API is off: the server was started with --disable-assets.",
                        )
                    return await handler(request)

                register(path)(checked)
                return handler

            return decorate

        return on

    on_get, on_head, on_post, on_put, on_delete = (
        gated(routes.get),
        gated(routes.head),
        gated(routes.post),
        gated(routes.put),
        gated(routes.delete),
    )
    # A server without a state store (--state-db unset: in-memory single-user) keeps its asset index in memory too.
    durable = server.config.state_db is not None
    index = AssetIndex(Path(server.workspace.root) / INDEX_FILE if durable else None)
    seeds: dict[str, dict] = {}  # tenant -> the state of its last seed

    async def on_cleanup(app: web.Application) -> None:
        for seed in seeds.values():
            if seed.get("task") is not None:
                await asyncio.gather(seed["task"], return_exceptions=True)
        index.close()

    server.app.on_cleanup.append(on_cleanup)

    def run(fn: Any, *args: Any, **kwargs: Any) -> Any:
        return asyncio.to_thread(fn, *args, **kwargs)  # copies the context: the tenant's folders

    def output_jobs() -> dict[tuple[str, str], str]:
        """(root, path in it) -> prompt id of the outputs of the newest prompts in the caller's history:
        an output's record names the job that made it (the web UI groups outputs by job). Only ids the
        web UI can take (UUIDs) are used."""
        out = {}
        for prompt_id, entry in server.prompt_queue.get_history(max_items=JOB_LOOKUP).items():
            if not UUID_MATCH.match(prompt_id):
                continue
            for node_output in (entry.get("outputs") or {}).values():
                for items in node_output.values() if isinstance(node_output, dict) else ():
                    for item in items if isinstance(items, list) else ():
                        if isinstance(item, dict) and isinstance(item.get("filename"), str):
                            rel = "/".join(p for p in (item.get("subfolder") or "", item["filename"]) if p)
                            out[(item.get("type") or "output", rel)] = prompt_id
        return out

    async def fresh(tenant: str, roots: tuple[str, ...] = LISTED) -> list[dict]:
        """The tenant's records, those of `roots` brought in line with its files first."""
        await run(index.sync, tenant, server.workspace, roots, jobs=output_jobs)
        return await run(index.all, tenant, roots)

    def preview_of(tenant: str, record: dict, by_id: dict | None = None) -> dict | None:
        pid = record["preview_id"]
        if not pid:
            return None
        found = by_id.get(pid) if by_id is not None else None
        return found if found is not None else index.get(tenant, pid)

    def own_model(tenant: str, path: str) -> bool:
        """Whether a hosted tenant may download this model file: only from its own model folder (the
        operator's are shared to load, not to take away). Without tenants every file is the user's."""
        if context.current() is None:
            return True
        own = Path(server.workspace.tenant_models_dir(tenant)).resolve()
        return Path(path).resolve().is_relative_to(own)

    async def answer(tenant: str, record: dict, status: int = 200, **extra: Any) -> web.Response:
        preview = await run(preview_of, tenant, record)
        return _json({**asset_json(record, preview), **extra}, status)

    @on_get("/assets")
    async def list_assets(request: web.Request) -> web.Response:
        if "metadata_filter" in request.query:
            return error(400, "UNSUPPORTED_PARAM", "metadata_filter is no longer supported")
        try:
            q = ListQuery.model_validate(query_dict(request))
        except ValidationError as exc:
            return invalid("INVALID_QUERY", exc)
        try:
            all_, any_, none = q.resolved()
        except ValueError as exc:
            return error(400, "INVALID_TAG_FILTER", str(exc))
        try:
            after = decode_cursor(q.after, q.sort, q.order) if q.after is not None else None
        except InvalidCursor as exc:
            return error(400, "INVALID_CURSOR", str(exc))
        tenant = _tenant(request)
        records = await fresh(tenant, roots_for(all_, any_))
        by_id = {r["id"]: r for r in records}
        hits = [r for r in records if q.matches(r, all_, any_, none) and (q.hash is None or r["hash"] == q.hash)]
        key = _SORT_KEYS[q.sort]
        hits.sort(key=lambda r: (key(r), r["id"]), reverse=q.order == "desc")
        if after is not None:  # the items past the cursor's (value, id) in the list's order
            past = (lambda r: (key(r), r["id"]) < after) if q.order == "desc" else (lambda r: (key(r), r["id"]) > after)
            start = next((i for i, r in enumerate(hits) if past(r)), len(hits))
        else:
            start = q.offset
        page = hits[start : start + q.limit]
        more = start + len(page) < len(hits)
        previews = await run(lambda: [preview_of(tenant, r, by_id) for r in page])
        body: dict[str, Any] = {
            "assets": [asset_json(r, p) for r, p in zip(page, previews)],
            "total": len(hits),
            "has_more": more,
        }
        if more and page and q.sort in CURSOR_SORTS:
            body["next_cursor"] = encode_cursor(q.sort, q.order, key(page[-1]), page[-1]["id"])
        return _json(body)

    @on_head("/assets/hash/{hash}")
    async def head_by_hash(request: web.Request) -> web.Response:
        hash_ = request.match_info["hash"].strip().lower()
        if not HASH_RE.match(hash_):
            return error(400, "INVALID_HASH", "hash must be like 'blake3:<hex>'")
        found = await run(index.by_hash, _tenant(request), hash_)
        return web.Response(status=200 if found is not None and os.path.isfile(found["path"]) else 404)

    @on_get(f"/assets/{{id:{UUID_RE}}}")
    async def get_asset(request: web.Request) -> web.Response:
        tenant, asset_id = _tenant(request), request.match_info["id"].lower()
        record = await run(index.get, tenant, asset_id)
        return await answer(tenant, record) if record is not None else _not_found(asset_id)

    @on_get(f"/assets/{{id:{UUID_RE}}}/content")
    async def content(request: web.Request) -> web.StreamResponse:
        tenant, asset_id = _tenant(request), request.match_info["id"].lower()
        record = await run(index.get, tenant, asset_id)
        if record is None:
            return _not_found(asset_id)
        if not os.path.isfile(record["path"]):
            return error(404, "FILE_NOT_FOUND", "Underlying file not found on disk.")
        if record["root"] == "models" and not own_model(tenant, record["path"]):
            return error(
                403,
                "FORBIDDEN",
                "The server's shared model files can be listed and loaded, not downloaded.",
                {"id": asset_id},
            )
        await run(index.touch, asset_id)
        headers = served_file_headers(record["name"], record["mime_type"])
        # Anything a browser could run is served as an attachment whatever was asked (served_file_headers).
        wanted = request.query.get("disposition", "attachment").strip().lower()
        disposition = headers["Content-Disposition"]
        if not disposition.startswith("attachment"):
            disposition = ("attachment; " if wanted != "inline" else "inline; ") + disposition
        return web.FileResponse(record["path"], headers={**headers, "Content-Disposition": disposition})

    @on_post("/assets/from-hash")
    async def from_hash(request: web.Request) -> web.Response:
        payload, problem = await _body(request)
        if problem is not None:
            return problem
        try:
            body = FromHashBody.model_validate(payload)
        except ValidationError as exc:
            return invalid("INVALID_BODY", exc)
        return await mint(_tenant(request), body, 201)

    @on_post("/assets")
    async def upload(request: web.Request) -> web.Response:
        if not request.content_type.startswith("multipart/"):
            return error(400, "INVALID_BODY", "Send multipart/form-data with a 'file' part and 'tags'.")
        limit_of = getattr(server, "v2_upload_limit", None)
        cap = limit_of(request) if limit_of is not None else server.config.max_upload_bytes
        folder = Path(server.workspace.root) / UPLOADS_DIR  # beside the tenants' folders, never in one
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=folder, prefix="upload-")
        tmp = Path(tmp_name)
        try:
            return await _upload(request, tmp, fd, cap)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()

    async def _upload(request: web.Request, tmp: Path, fd: int, cap: int) -> web.Response:
        fields: dict[str, Any] = {"tags": []}
        digest, size, client_name, part_type = blake3.blake3(), 0, None, None
        with os.fdopen(fd, "wb") as out:
            try:
                async for part in await request.multipart():
                    if not isinstance(part, BodyPartReader) or part.name is None:
                        continue
                    if part.name == "file":
                        if client_name is not None:
                            return error(400, "INVALID_BODY", "Send one 'file' part per upload.")
                        client_name, part_type = part.filename or "", part.headers.get("Content-Type")
                        while chunk := await part.read_chunk(CHUNK):
                            size += len(chunk)
                            if size > cap:
                                return error(413, "FILE_TOO_LARGE", f"The upload is over {cap} bytes.")
                            digest.update(chunk)
                            out.write(chunk)
                    elif part.name == "tags":
                        fields["tags"].append(await part.text())
                    else:
                        fields[part.name] = await part.text()
            except UNDECODABLE_FORM as exc:
                return error(400, "INVALID_BODY", f"Malformed multipart body: {exc}")
        try:
            spec = UploadSpec.model_validate(fields)
        except ValidationError as exc:
            return invalid("INVALID_BODY", exc)
        tenant = _tenant(request)
        if client_name is None:
            if spec.hash is None:
                return error(400, "MISSING_INPUT", "Send a 'file' part, or the 'hash' of content you have.")
            return await mint(tenant, spec, 200)
        if size == 0:
            return error(400, "EMPTY_UPLOAD", "The 'file' part is empty.")
        hash_ = "blake3:" + digest.hexdigest()
        if spec.hash is not None and spec.hash != hash_:
            return error(400, "HASH_MISMATCH", f"The file's hash is {hash_}, not {spec.hash}.")
        if spec.preview_id is not None and await run(index.get, tenant, spec.preview_id) is None:
            return error(400, "INVALID_BODY", f"preview_id {spec.preview_id} names no asset")
        try:
            dest, facts_of = _destination(spec.tags, tenant, suffix_of(client_name))
        except ValueError as exc:
            return error(400, "INVALID_BODY", str(exc))
        if facts_of.root != "models":
            problem = await run(pixels_problem, tmp)
        else:  # a tenant's model file must be a well-formed safetensors file (the loaders trust it)
            problem = await run(safetensors_problem, tmp) if context.current() is not None else None
        if problem is not None:
            return error(400, "INVALID_BODY", f"Refused file: {problem}.")
        refusal_of = getattr(server, "v2_storage_refusal", None)
        refusal = refusal_of(request, size) if refusal_of is not None else None
        if refusal is not None:
            return refusal
        existed = await run(index.by_hash, tenant, hash_)
        dest.mkdir(parents=True, exist_ok=True)
        stored, _ = await run(place_upload, tmp, dest, hash_.split(":", 1)[1] + suffix_of(client_name), hash_)
        path = dest / stored
        stat = path.stat()
        facts = FileFacts(
            facts_of.root,
            facts_of.system_tags,
            stored,
            f"{dest.name}/{stored}" if facts_of.root == "models" else stored,
            stat.st_size,
            stat.st_mtime,
        )
        record = new_record(
            tenant,
            str(path),
            facts,
            spec.name or Path(client_name).name or stored,
            time.time(),
            hash=hash_,
            mime_type=spec.mime_type or part_type or None,
            user_metadata=spec.user_metadata,
            tags=[t for t in spec.tags if t not in facts.system_tags and t != "preview"],
            preview_id=spec.preview_id,
        )
        await run(index.add, record)
        new = existed is None
        return await answer(tenant, record, 201 if new else 200, created_new=new)

    async def mint(tenant: str, spec: FromHashBody | UploadSpec, status: int) -> web.Response:
        """A new record over bytes the tenant already has (found by their hash)."""
        source = await run(index.by_hash, tenant, spec.hash)
        if source is None or not os.path.isfile(source["path"]):
            return error(404, "ASSET_NOT_FOUND", f"Asset content {spec.hash} does not exist")
        if spec.preview_id is not None and await run(index.get, tenant, spec.preview_id) is None:
            return error(400, "INVALID_BODY", f"preview_id {spec.preview_id} names no asset")
        now = time.time()
        record = {
            **source,
            "id": str(uuid.uuid4()),
            "name": spec.name or spec.hash.split(":", 1)[1],
            "mime_type": spec.mime_type or source["mime_type"],
            "user_metadata": spec.user_metadata,
            "tags": [t for t in spec.tags if t not in source["system_tags"]],
            "preview_id": spec.preview_id,
            "created": now,
            "updated": now,
            "accessed": now,
            "missing": 0,
        }
        await run(index.add, record)
        return await answer(tenant, record, status, created_new=False)

    def _destination(tags: list[str], tenant: str, ext: str) -> tuple[Path, FileFacts]:
        """The folder new bytes go to, from the one destination tag (input, output, or models with one
        model_type:<folder>), and the facts of a file there; ValueError says what is wrong."""
        roles = [t for t in tags if t in ("input", "models", "output", "preview")]
        if len(roles) != 1:
            raise ValueError("uploads require exactly one destination tag: input, models or output")
        ws = server.workspace
        if roles[0] == "preview":
            raise ValueError("this server keeps no previews folder: upload previews with the 'input' tag")
        if roles[0] != "models":
            return Path(ws.input_dir if roles[0] == "input" else ws.output_dir), FileFacts(
                roles[0], [roles[0]], "", "", 0, 0
            )
        kinds = [t[len(MODEL_TYPE) :] for t in tags if t.startswith(MODEL_TYPE)]
        if len(kinds) != 1 or not kinds[0]:
            raise ValueError("models uploads require exactly one model_type:<folder_name> tag")
        folders = model_folders(ws)
        key = ws.folder_key(kinds[0])
        if key not in folders:
            raise ValueError(f"unknown model category '{kinds[0]}'")
        bases, exts = folders[key]
        if exts and ext not in exts:
            raise ValueError(f"{key} lists only {', '.join(sorted(exts))} files; the file is {ext or 'unnamed'}")
        if context.current() is not None:  # a tenant writes to its own model folder only, safetensors only
            if ext != ".safetensors" or not hasattr(ws, "tenant_models_dir"):
                raise ValueError("a tenant uploads models as .safetensors files only")
            return ws.tenant_models_dir(tenant, key), FileFacts("models", ["models", MODEL_TYPE + key], "", "", 0, 0)
        if not bases:
            raise ValueError(f"no folder is configured for '{key}'")
        return bases[0], FileFacts("models", ["models", MODEL_TYPE + key], "", "", 0, 0)

    @on_put(f"/assets/{{id:{UUID_RE}}}")
    async def update(request: web.Request) -> web.Response:
        tenant, asset_id = _tenant(request), request.match_info["id"].lower()
        payload, problem = await _body(request)
        if problem is not None:
            return problem
        try:
            body = UpdateBody.model_validate(payload)
        except ValidationError as exc:
            return invalid("INVALID_BODY", exc)
        if await run(index.get, tenant, asset_id) is None:
            return _not_found(asset_id)
        if body.preview_id is not None and (
            body.preview_id == asset_id or await run(index.get, tenant, body.preview_id) is None
        ):
            return error(400, "INVALID_BODY", f"preview_id {body.preview_id} names no other asset")
        changes = {
            k: v
            for k, v in (("name", body.name), ("user_metadata", body.user_metadata), ("preview_id", body.preview_id))
            if v is not None
        }
        await run(index.update, asset_id, **changes)
        return await answer(tenant, await run(index.get, tenant, asset_id))

    @on_delete(f"/assets/{{id:{UUID_RE}}}")
    async def delete(request: web.Request) -> web.Response:
        asset_id = request.match_info["id"].lower()
        if not await run(index.delete, _tenant(request), asset_id):
            return _not_found(asset_id)
        return web.Response(status=204)

    async def tag_change(request: web.Request, adding: bool) -> web.Response:
        tenant, asset_id = _tenant(request), request.match_info["id"].lower()
        payload, problem = await _body(request)
        if problem is not None:
            return problem
        try:
            body = TagsBody.model_validate(payload)
        except ValidationError as exc:
            return invalid("INVALID_BODY", exc)
        system = [t for t in body.tags if t in SYSTEM_TAGS]
        if system:
            return error(
                400,
                "SYSTEM_TAG_FORBIDDEN",
                f"Tag '{system[0]}' is system-managed and cannot be modified via the API",
                {"tag": system[0]},
            )
        record = await run(index.get, tenant, asset_id)
        if record is None:
            return _not_found(asset_id)
        present, own = tags_of(record), record["tags"]
        if adding:
            added = [t for t in body.tags if t not in present]
            await run(index.update, asset_id, tags=own + added)
            result = {"added": added, "already_present": [t for t in body.tags if t in present]}
        else:
            removed = [t for t in body.tags if t in own]
            await run(index.update, asset_id, tags=[t for t in own if t not in removed])
            result = {
                "removed": removed,
                "not_present": [t for t in body.tags if t not in present],
                "protected": [t for t in body.tags if t in record["system_tags"]],
            }
        return _json({**result, "total_tags": tags_of(await run(index.get, tenant, asset_id))})

    @on_post(f"/assets/{{id:{UUID_RE}}}/tags")
    async def add_tags(request: web.Request) -> web.Response:
        return await tag_change(request, True)

    @on_delete(f"/assets/{{id:{UUID_RE}}}/tags")
    async def remove_tags(request: web.Request) -> web.Response:
        return await tag_change(request, False)

    @on_get("/tags")
    async def list_tags(request: web.Request) -> web.Response:
        try:
            q = TagsQuery.model_validate(dict(request.query))
        except ValidationError as exc:
            return invalid("INVALID_QUERY", exc)
        counts = Counter(t for r in await fresh(_tenant(request)) for t in tags_of(r))
        rows = [(name, n) for name, n in counts.items() if not q.prefix or name.startswith(q.prefix)]
        rows.sort(key=(lambda x: (-x[1], x[0])) if q.order == "count_desc" else (lambda x: x[0]))
        page = rows[q.offset : q.offset + q.limit]
        return _json(
            {
                "tags": [{"name": n, "count": c} for n, c in page],
                "total": len(rows),
                "has_more": q.offset + len(page) < len(rows),
            }
        )

    @on_get("/assets/tags/refine")
    async def refine(request: web.Request) -> web.Response:
        if "metadata_filter" in request.query:
            return error(400, "UNSUPPORTED_PARAM", "metadata_filter is no longer supported")
        try:
            q = RefineQuery.model_validate(query_dict(request))
            all_, any_, none = q.resolved()
        except ValidationError as exc:
            return invalid("INVALID_QUERY", exc)
        except ValueError as exc:
            return error(400, "INVALID_TAG_FILTER", str(exc))
        records = await fresh(_tenant(request), roots_for(all_, any_))
        counts = Counter(t for r in records if q.matches(r, all_, any_, none) for t in tags_of(r))
        return _json({"tag_counts": dict(counts.most_common(q.limit))})

    @on_post("/assets/seed")
    async def seed(request: web.Request) -> web.Response:
        try:
            payload = loads_json(await request.read())
        except ValueError:
            payload = None
        asked = payload.get("roots", list(ROOTS)) if isinstance(payload, dict) else list(ROOTS)
        roots = tuple(r for r in ROOTS if isinstance(asked, list) and r in asked)
        if not roots:
            return error(400, "INVALID_BODY", f"No valid roots specified (any of {', '.join(ROOTS)})")
        tenant = _tenant(request)
        state = seeds.get(tenant)
        if state is not None and state["state"] == "RUNNING":
            return _json({"status": "already_running"}, 409)
        state = seeds[tenant] = {"state": "RUNNING", "progress": None, "errors": [], "task": None}

        started = time.monotonic()

        async def scan() -> None:
            try:
                counts = await run(index.sync, tenant, server.workspace, roots, reveal=True, jobs=output_jobs)
                state["progress"] = {
                    "scanned": counts["scanned"],
                    "total": counts["scanned"],
                    "created": counts["created"],
                    "skipped": counts["scanned"] - counts["created"],
                }
            except Exception as exc:  # noqa: BLE001 - a failed scan is the seed's status, not the server's
                state["errors"].append(str(exc))
            finally:
                state["state"] = "IDLE"
            progress = state["progress"] or {"scanned": 0, "total": 0, "created": 0, "skipped": 0}
            for event in SEED_EVENTS:
                server.send_sync(
                    event,
                    {
                        "roots": list(roots),
                        "phase": "full",
                        "enriched": 0,
                        "elapsed": round(time.monotonic() - started, 3),
                        **progress,
                    },
                )

        if request.query.get("wait", "").lower() in ("true", "1", "yes"):
            await scan()
            return _json({"status": "completed", "progress": state["progress"], "errors": state["errors"]})
        state["task"] = asyncio.get_running_loop().create_task(scan())  # in the request's (tenant's) context
        return _json({"status": "started"}, 202)

    @on_get("/assets/seed/status")
    async def seed_status(request: web.Request) -> web.Response:
        state = seeds.get(_tenant(request)) or {"state": "IDLE", "progress": None, "errors": []}
        return _json({"state": state["state"], "progress": state["progress"], "errors": state["errors"]})

    @on_post("/assets/prune")
    async def prune(request: web.Request) -> web.Response:
        counts = await run(index.sync, _tenant(request), server.workspace)
        return _json({"status": "completed", "marked": counts["marked_missing"]})
