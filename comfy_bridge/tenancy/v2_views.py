"""The JSON shapes of Comfy API v2 (Job, Output, Asset, list items) built from our records, and the
job's terminal state read from a history entry of the ordinary queue."""

from __future__ import annotations

import mimetypes
import posixpath
from typing import Any

from comfy_bridge.server.v2_common import PREFIX, iso

_LATENT_EXTS = (".latent",)


def content_type_of(name: str) -> str:
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def output_kind(content_type: str, name: str) -> str:
    """The contract's OutputType from the file's media type (a saved latent is `latent`)."""
    major = content_type.split("/", 1)[0]
    if name.lower().endswith(_LATENT_EXTS):
        return "latent"
    if major in ("image", "video", "audio", "text"):
        return major
    return "file"


def asset_url(base: str, asset_id: str) -> str:
    return f"{base}{PREFIX}/assets/{asset_id}/content"


def output_json(row: dict, base: str) -> dict:
    return {
        "node_id": row["node_id"],
        "name": posixpath.basename(row["name"]),
        "type": output_kind(row["content_type"], row["name"]),
        "content_type": row["content_type"],
        "size_bytes": row["size"],
        "id": row["id"],
        "hash": row["hash"],
        "url": asset_url(base, row["id"]),
        "url_expires_at": iso(row["expires"]),
        "job_id": row["job_id"],
    }


def asset_json(row: dict, base: str, now: float, created_new: bool | None = None) -> dict:
    # The content URL is this server's own, guarded by the caller's key: it lasts as long as the asset
    # (a day at a time for one that never expires, so a client refreshes it as it would a signed one).
    url_expires = row["expires"] if row["expires"] is not None else now + 24 * 3600
    data = {
        "id": row["id"],
        "hash": row["hash"],
        "size_bytes": row["size"],
        "content_type": row["content_type"],
        "file_path": row["file_path"],
        "created_at": iso(row["created"]),
        "url": asset_url(base, row["id"]),
        "url_expires_at": iso(url_expires),
        "expires_at": iso(row["expires"]),
        "job_id": row["job_id"],
        "tags": row["tags"],
    }
    if created_new is not None:
        data["created_new"] = created_new
    return data


def links(base: str, job_id: str) -> dict:
    root = f"{base}{PREFIX}/jobs/{job_id}"
    return {"self": root, "events": root + "/events", "cancel": root + "/cancel"}


def job_json(job: dict, state: dict, outputs: list[dict], base: str) -> dict:
    """`state`: status, queue_position, progress, started, completed, error (see V2Service.state)."""
    started, completed = state.get("started"), state.get("completed")
    queue_ms = round((started - job["created"]) * 1000) if started else None
    execution_ms = round((completed - started) * 1000) if started and completed else None
    return {
        "id": job["id"],
        "status": state["status"],
        "created_at": iso(job["created"]),
        "started_at": iso(started),
        "completed_at": iso(completed),
        "expires_at": iso(job["expires"]),
        "queue_position": state.get("queue_position"),
        "progress": state.get("progress"),
        "outputs": [output_json(o, base) for o in outputs],
        "error": state.get("error"),
        "metrics": {"queue_ms": queue_ms, "execution_ms": execution_ms},
        "metadata": job["metadata"],
        "urls": links(base, job["id"]),
    }


def list_item(job: dict, state: dict, base: str) -> dict:
    """A job in GET /api/v2/jobs: the light shape (`client.jobs.get(id)` gives the full one)."""
    updated = state.get("completed") or state.get("started") or job["created"]
    return {
        "id": job["id"],
        "status": state["status"],
        "create_time": iso(job["created"]),
        "update_time": iso(updated),
        "created_at": iso(job["created"]),
        "completed_at": iso(state.get("completed")),
        "metadata": job["metadata"],
        "urls": links(base, job["id"]),
    }


def _seconds(value: Any) -> float | None:
    return value / 1000 if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def terminal_state(entry: dict) -> dict:
    """status, started, completed and error of a finished prompt's history entry."""
    info = entry.get("status") or {}
    started = completed = error = None
    interrupted = False
    for message in info.get("messages") or []:
        if not (isinstance(message, (list, tuple)) and len(message) == 2 and isinstance(message[1], dict)):
            continue
        event, data = message
        if event == "execution_start":
            started = _seconds(data.get("timestamp"))
        elif event in ("execution_success", "execution_error", "execution_interrupted"):
            completed = _seconds(data.get("timestamp"))
        if event == "execution_interrupted":
            interrupted = True
        elif event == "execution_error":
            traceback = data.get("traceback")
            error = {
                "code": "node_execution_error",
                "message": str(data.get("exception_message", "")),
                "node_id": data.get("node_id"),
                "class_type": data.get("node_type"),
                "traceback": "".join(traceback) if isinstance(traceback, list) else traceback,
            }
    if interrupted:
        status, error = "canceled", None
    elif info.get("status_str") == "success":
        status, error = "succeeded", None
    else:
        status = "failed"
        error = error or {
            "code": "execution_failed",
            "message": "The job failed.",
            "node_id": None,
            "class_type": None,
            "traceback": None,
        }
    return {"status": status, "started": started, "completed": completed, "error": error}
