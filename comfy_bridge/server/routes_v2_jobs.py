"""Comfy API v2 jobs: POST/GET /api/v2/jobs, GET /api/v2/jobs/{id}, .../workflow, .../cancel, the
live event stream .../events (Server-Sent Events from our engine's own messages) and /api/v2/health.

A job is a prompt of the server's queue, validated as POST /prompt validates; the routes answer in
the contract's shapes and error envelope. The hosted server (comfy_bridge.tenancy) installs them
with its V2Service, which keeps the records and scopes everything to the caller's tenant."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
import uuid
from typing import TYPE_CHECKING, Any

from aiohttp import web

from comfy_bridge.tenancy.v2_assets import resolve_references
from comfy_bridge.tenancy.v2_views import output_json

from .common import loads_json
from .prompt import longest_text, shape_error
from .prompt_queue import SENSITIVE_EXTRA_DATA_KEYS
from .v2_common import IDEMPOTENCY_TTL_S, PREFIX, base_url, error, idempotency_key_problem, not_found, ok, tenant_of
from .websocket import preview_frame

if TYPE_CHECKING:
    from comfy_bridge.tenancy.v2_service import V2Service

TERMINAL = ("succeeded", "failed", "canceled", "expired")
STATUSES = ("queued", "running", "succeeded", "canceling", "canceled", "failed", "expired")
DEFAULT_PAGE, MAX_PAGE = 20, 100
KEEPALIVE_S = 15.0
MAX_STREAMS_PER_TENANT = 16
# Job labels (Comfy Cloud's rules): at most 16 pairs, keys of 1-40 safe characters, values of at most
# 256 UTF-8 bytes with no control or bidirectional formatting characters; at most 3 list filters.
MAX_LABELS, MAX_LABEL_BYTES, MAX_FILTERS = 16, 256, 3
_LABEL_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
_LABEL_BAD = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def label_error(metadata: Any) -> str | None:
    if not isinstance(metadata, dict):
        return "metadata must be an object of string labels"
    if len(metadata) > MAX_LABELS:
        return f"metadata has {len(metadata)} labels; at most {MAX_LABELS}"
    for key, value in metadata.items():
        if not _LABEL_KEY.match(key):
            return f"metadata key {key[:60]!r} must be 1-40 of A-Z a-z 0-9 _ - ."
        if not isinstance(value, str) or len(value.encode()) > MAX_LABEL_BYTES or _LABEL_BAD.search(value):
            return f"metadata value of {key!r} must be a string of at most {MAX_LABEL_BYTES} bytes, no controls"
    return None


def is_ui_format(workflow: dict) -> bool:
    """The web UI's export (nodes and links) instead of the API format (node id -> class_type, inputs)."""
    return isinstance(workflow.get("nodes"), list) and "links" in workflow


def encode_cursor(cursor: tuple[float, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(cursor)).encode()).decode().rstrip("=")


def decode_cursor(text: str) -> tuple[float, str] | None:
    """The (created, job id) an encode_cursor text holds; None for anything else (deep nesting and numbers
    beyond a float included)."""
    try:
        created, job_id = loads_json(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        created = float(created) if isinstance(created, (int, float)) and not isinstance(created, bool) else None
    except (ValueError, TypeError, OverflowError, binascii.Error):
        return None
    if created is None or not isinstance(job_id, str):
        return None
    return created, job_id


def sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def encode_preview(preview: tuple) -> dict:
    """The engine's preview (format, PIL image, max size) as the contract's PreviewEvent."""
    node_id, image = preview
    encoded = preview_frame(tuple(image))[8:]  # past the event type and the image format id
    content_type = "image/png" if image[0] == "PNG" else "image/jpeg"
    return {"node_id": node_id or "", "content_type": content_type, "data_base64": base64.b64encode(encoded).decode()}


def add_routes(app: web.Application, server: Any, service: V2Service) -> None:
    streams: dict[str, int] = {}

    async def submit(request: web.Request) -> web.Response:
        tenant = tenant_of(request)
        raw = await request.read()
        refusal = server.v2_prompt_refusal(request, raw)
        if refusal is not None:
            return refusal
        try:
            body = loads_json(raw)
        except ValueError:
            return error(400, "invalid_request", "The body must be JSON.")
        if not isinstance(body, dict):
            return error(400, "invalid_request", "The body must be a JSON object.")
        if body.get("webhook_url") is not None or body.get("inputs") is not None:
            return error(422, "invalid_request", "'webhook_url' and 'inputs' are reserved and not accepted yet.")
        workflow = body.get("workflow")
        if not isinstance(workflow, dict) or not workflow:
            return error(422, "invalid_workflow", "Missing 'workflow' (an API-format graph).")
        if is_ui_format(workflow):
            return error(
                422,
                "workflow_format_ui",
                "This is the web UI's workflow export; submit the API format (Export (API) in the web UI).",
            )
        problem = shape_error(workflow)
        if problem is not None:
            return error(422, "invalid_workflow", f"The workflow is not a map of nodes: {problem}.")
        _, max_chars = server.prompt_limits(request)
        if max_chars is not None and (length := longest_text(workflow))[0] > max_chars:
            return error(
                413,
                "payload_too_large",
                f"Text at node {length[1]} is {length[0]} characters (limit max_text_chars = {max_chars}).",
            )
        extra = body.get("extra_data")
        if extra is not None and (
            not isinstance(extra, dict)
            or set(extra) - {"api_key_comfy_org"}
            or not all(isinstance(v, str) for v in extra.values())
        ):
            return error(422, "invalid_request", "'extra_data' takes only 'api_key_comfy_org' (a string).")
        metadata = body.get("metadata") or {}
        problem = label_error(metadata)
        if problem is not None:
            return error(422, "metadata_invalid", problem)
        key = request.headers.get("Idempotency-Key")
        if key is not None and (problem := idempotency_key_problem(key)) is not None:
            return error(400, "invalid_request", problem)
        if key is not None and not await asyncio.to_thread(service.store.claim, tenant, "jobs", key, IDEMPOTENCY_TTL_S):
            return error(
                422,
                "idempotency_key_reuse",
                "This Idempotency-Key was used already; keys are single "
                "use. Poll or list your jobs instead of resubmitting.",
            )
        created = False
        try:
            resolved, missing = await asyncio.to_thread(resolve_references, service, tenant, workflow)
            if missing:
                return error(
                    422,
                    "missing_asset",
                    f"Unresolvable core/ASSET reference(s): {', '.join(missing)}",
                    {"missing_ids": missing},
                )
            job_id = str(uuid.uuid4())
            valid, err, outputs, node_errors = await server.validate(job_id, resolved, None)
            if not valid:
                message = err.get("message", "Invalid workflow") if isinstance(err, dict) else str(err)
                return error(422, "invalid_workflow", message, {"node_errors": node_errors, "error": err})
            number = server.number
            server.number += 1
            sensitive = {k: extra[k] for k in SENSITIVE_EXTRA_DATA_KEYS if extra and k in extra}
            created = True  # from here the outcome may be a job: the key stays claimed
            await asyncio.to_thread(
                service.create_job, tenant, job_id, number, resolved, list(outputs), metadata, sensitive
            )
        finally:
            if key is not None and not created:
                await asyncio.to_thread(service.store.release, tenant, "jobs", key)
        view = await asyncio.to_thread(service.job_view, tenant, job_id, base_url(request))
        return ok(view, status=201)

    async def list_jobs(request: web.Request) -> web.Response:
        query = request.rel_url.query
        try:
            limit = int(query.get("limit", DEFAULT_PAGE))
        except ValueError:
            limit = 0
        if not 1 <= limit <= MAX_PAGE:
            return error(400, "invalid_request", f"'limit' must be an integer from 1 to {MAX_PAGE}.")
        cursor = None
        if query.get("cursor"):
            cursor = decode_cursor(query["cursor"])
            if cursor is None:
                return error(400, "invalid_cursor", "This cursor was not issued by this server.")
        statuses = None
        if query.get("status"):
            statuses = {s.strip() for s in query["status"].split(",") if s.strip()}
            if statuses - set(STATUSES):
                return error(400, "invalid_request", f"Unknown status: {', '.join(sorted(statuses - set(STATUSES)))}.")
        labels = [
            (k[len("metadata[") : -1], v) for k, v in query.items() if k.startswith("metadata[") and k.endswith("]")
        ]
        if len(labels) > MAX_FILTERS or label_error(dict(labels)) is not None:
            return error(422, "invalid_metadata_filter", f"At most {MAX_FILTERS} metadata filters of valid labels.")
        items, after = await asyncio.to_thread(
            service.list_jobs, tenant_of(request), limit, cursor, statuses, labels, base_url(request)
        )
        return ok(
            {
                "jobs": items,
                "next_cursor": encode_cursor(after) if after else None,
                "has_more": after is not None,
                "limit": limit,
            }
        )

    async def get_job(request: web.Request) -> web.Response:
        view = await asyncio.to_thread(
            service.job_view, tenant_of(request), request.match_info["id"], base_url(request)
        )
        return ok(view) if view is not None else not_found()

    async def get_workflow(request: web.Request) -> web.Response:
        workflow = await asyncio.to_thread(service.workflow, tenant_of(request), request.match_info["id"])
        return ok({"workflow": workflow, "format": "api"}) if workflow is not None else not_found()

    async def cancel(request: web.Request) -> web.Response:
        view = await asyncio.to_thread(service.cancel, tenant_of(request), request.match_info["id"], base_url(request))
        return ok(view) if view is not None else not_found()

    async def events(request: web.Request) -> web.StreamResponse:
        tenant, job_id, base = tenant_of(request), request.match_info["id"], base_url(request)
        if await asyncio.to_thread(service.job_view, tenant, job_id, base) is None:
            return not_found()
        if streams.get(tenant, 0) >= MAX_STREAMS_PER_TENANT:
            return error(
                429,
                "too_many_streams",
                "Too many open event streams; poll GET /api/v2/jobs/{id} or close one.",
                retry_after=5,
            )
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        if request.method == "HEAD":  # the stream's headers, without holding the connection open
            return web.Response(headers=headers)
        response = web.StreamResponse(headers=headers)
        await response.prepare(request)
        streams[tenant] = streams.get(tenant, 0) + 1
        queue = service.hub.subscribe(job_id)  # before the snapshot: no transition falls in between
        try:
            view = await asyncio.to_thread(service.job_view, tenant, job_id, base)
            if view is None:
                return response
            await response.write(sse("status", status_event(view)))
            last = (view["status"], view["queue_position"])
            live = service.hub.progress(job_id)
            seen = 0  # changes the first snapshot holds; their events may still wait in the queue
            if view["progress"] is not None:
                seen, progress = live.latest() if live is not None else (0, view["progress"])
                await response.write(sse("progress", progress))
            if live is not None and live.preview is not None:
                await response.write(sse("preview", await asyncio.to_thread(encode_preview, live.preview)))
            done = view["status"] in TERMINAL
            while not done:
                try:
                    event, payload = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    await response.write(b": keepalive\n\n")
                    continue
                if event == "queue":  # the queue changed: a queued job reports a position that moved
                    if last[0] != "queued":
                        continue
                    view = await asyncio.to_thread(service.job_view, tenant, job_id, base)
                    if view is None or (view["status"], view["queue_position"]) == last or view["status"] != "queued":
                        continue  # a transition out of the queue comes as its own status event
                    event, payload = "status", status_event(view)
                elif event == "progress":
                    seq, payload = payload
                    if seq <= seen:
                        continue
                elif event == "output":
                    payload = output_json(payload, base)
                elif event == "preview":
                    payload = await asyncio.to_thread(encode_preview, payload)
                elif event == "status" and payload["status"] in TERMINAL:
                    view = await asyncio.to_thread(service.job_view, tenant, job_id, base)
                    payload = status_event(view) if view is not None else payload
                    done = True
                if event == "status":
                    last = (payload["status"], payload.get("queue_position"))
                await response.write(sse(event, payload))
        except (ConnectionResetError, asyncio.CancelledError):
            pass  # the client went away: nothing to end
        finally:
            service.hub.unsubscribe(job_id, queue)
            streams[tenant] -= 1
        return response

    async def health(request: web.Request) -> web.Response:
        alive = server.worker.alive()
        return web.json_response(
            {"status": "healthy" if alive else "unhealthy", "api": "v2"}, status=200 if alive else 503
        )

    app.router.add_get(PREFIX + "/health", health)
    app.router.add_post(PREFIX + "/jobs", submit)
    app.router.add_get(PREFIX + "/jobs", list_jobs)
    app.router.add_get(PREFIX + "/jobs/{id}", get_job)
    app.router.add_get(PREFIX + "/jobs/{id}/workflow", get_workflow)
    app.router.add_post(PREFIX + "/jobs/{id}/cancel", cancel)
    app.router.add_get(PREFIX + "/jobs/{id}/events", events)


def status_event(view: dict) -> dict:
    """The `status` event: status and queue position; a terminal one also carries the complete outputs."""
    data = {"status": view["status"], "queue_position": view["queue_position"]}
    if view["status"] in TERMINAL:
        data["outputs"] = view["outputs"]
    return data
