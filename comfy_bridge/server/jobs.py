"""The jobs API the current web UI uses for its queue and history panels:
GET /jobs, GET /jobs/{job_id}, POST /jobs/{job_id}/cancel, POST /jobs/cancel (all also under /api).

A job is a queue item or a history entry seen through one shape: id, status
(pending | in_progress | completed | failed | cancelled), times in ms, output counts, a preview."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from nodes import progress

from .common import json_response, read_json

if TYPE_CHECKING:
    from .app import PromptServer

STATUSES = ("pending", "in_progress", "completed", "failed", "cancelled")
HISTORY_STATUSES = {"completed", "failed", "cancelled"}
PREVIEWABLE = {"images", "video", "audio", "3d", "text"}
_3D_EXTS = (".obj", ".fbx", ".gltf", ".glb", ".usdz")
_TEXT_EXTS = (".txt", ".md", ".json")
TEXT_PREVIEW_MAX = 1024  # characters of a text output shown as a job's preview


def _drop_none(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


def _create_time_and_workflow(extra_data: Any) -> tuple[Any, Any]:
    """(create_time, workflow id) of a stored item; a part of another shape (a row stored before
    POST /prompt checked extra_data, or damaged) is left out, never an error for the whole list."""
    extra_data = extra_data if isinstance(extra_data, dict) else {}
    pnginfo = extra_data.get("extra_pnginfo")
    workflow = pnginfo.get("workflow") if isinstance(pnginfo, dict) else None
    workflow_id = workflow.get("id") if isinstance(workflow, dict) else None
    create_time = extra_data.get("create_time")
    if isinstance(create_time, bool) or not isinstance(create_time, (int, float)):
        create_time = None  # the list sorts by it: a string would fail the sort
    return create_time, workflow_id if isinstance(workflow_id, (str, int, float)) else None


def _file_item(item: Any) -> Any:
    """A 3D file named by a bare string becomes a file item, as today's ComfyUI lists it."""
    if isinstance(item, str) and item.lower().endswith(_3D_EXTS):
        return {"filename": item, "type": "output", "subfolder": "", "mediaType": "3d"}
    return item


def _output_items(outputs: dict):
    """(node_id, media_type, item) for every output item, file items as dicts and other entries (a text
    node's strings) as they are; flags such as `animated` skipped."""
    for node_id, node_out in outputs.items():
        if not isinstance(node_out, dict):
            continue
        for media_type, items in node_out.items():
            if media_type == "animated" or not isinstance(items, list):
                continue
            for item in items:
                if item is not None:
                    yield node_id, media_type, _file_item(item)


def detail_outputs(outputs: dict) -> dict:
    """A job's outputs for GET /jobs/{id}: 3D file names as file items, None entries dropped."""
    return {
        node_id: {
            media_type: [_file_item(i) for i in items if i is not None]
            if media_type != "animated" and isinstance(items, list)
            else items
            for media_type, items in node_out.items()
        }
        if isinstance(node_out, dict)
        else node_out
        for node_id, node_out in outputs.items()
    }


def _text_preview(node_id: str, item: Any) -> dict:
    """A text output shown as the job's preview when it has nothing else to show, cut at TEXT_PREVIEW_MAX."""
    text = str(item[0] if isinstance(item, (list, tuple)) and item else item)
    preview = {"content": text[:TEXT_PREVIEW_MAX], "nodeId": node_id, "mediaType": "text"}
    if len(text) > TEXT_PREVIEW_MAX:
        preview["truncated"] = True
    return preview


def _previewable(media_type: str, item: dict) -> bool:
    fmt = str(item.get("format", ""))
    name = str(item.get("filename", "")).lower()
    return (
        media_type in PREVIEWABLE
        or fmt.startswith(("video/", "audio/"))
        or name.endswith(_3D_EXTS)
        or name.endswith(_TEXT_EXTS)
    )


def outputs_summary(outputs: dict) -> tuple[int, int, dict | None]:
    """(outputs_count, previewable_count, preview_output): saved visual media is preferred as the
    preview, then other visual media (temp previews), then text files, then a text node's own text
    (today's ComfyUI; such text is preview material only, not counted as an output)."""
    count = previewable = 0
    best: dict[int, dict] = {}
    for node_id, media_type, item in _output_items(outputs):
        if not isinstance(item, dict):
            if media_type == "text":
                best.setdefault(3, _text_preview(node_id, item))
            continue
        count += 1
        if not _previewable(media_type, item):
            continue
        previewable += 1
        name = str(item.get("filename", "")).lower()
        rank = 2 if media_type == "text" or name.endswith(_TEXT_EXTS) else (0 if item.get("type") == "output" else 1)
        best.setdefault(rank, {**item, "nodeId": node_id, "mediaType": item.get("mediaType", media_type)})
    preview = next((best[r] for r in sorted(best)), None)
    return count, previewable, preview


def queue_job(item: list, status: str, detail: bool = False) -> dict:
    number, prompt_id, prompt, extra_data, _ = item
    create_time, workflow_id = _create_time_and_workflow(extra_data)
    job = _drop_none(
        {
            "id": prompt_id,
            "status": status,
            "priority": number,
            "create_time": create_time,
            "outputs_count": 0,
            "previewable_outputs_count": 0,
            "workflow_id": workflow_id,
        }
    )
    if detail:
        job["workflow"] = {"prompt": prompt, "extra_data": extra_data}
    return job


def history_job(prompt_id: str, entry: dict, detail: bool = False) -> dict:
    number, _, prompt, extra_data, _ = entry["prompt"]
    create_time, workflow_id = _create_time_and_workflow(extra_data)
    status_info = entry.get("status") or {}
    start = end = error = None
    interrupted = False
    for event, data in status_info.get("messages", []):
        if not isinstance(data, dict):
            continue
        if event == "execution_start":
            start = data.get("timestamp")
        elif event in ("execution_success", "execution_error", "execution_interrupted"):
            end = data.get("timestamp")
            error = data if event == "execution_error" else error
            interrupted = interrupted or event == "execution_interrupted"
    if status_info.get("status_str") == "error":
        status = "cancelled" if interrupted else "failed"
    else:
        status = "completed"
    outputs = entry.get("outputs") or {}
    count, previewable, preview = outputs_summary(outputs)
    job = _drop_none(
        {
            "id": prompt_id,
            "status": status,
            "priority": number,
            "create_time": create_time,
            "execution_start_time": start,
            "execution_end_time": end,
            "execution_error": error,
            "outputs_count": count,
            "previewable_outputs_count": previewable,
            "preview_output": preview,
            "workflow_id": workflow_id,
        }
    )
    if detail:
        job["outputs"] = detail_outputs(outputs)
        job["execution_status"] = status_info
        job["workflow"] = {"prompt": prompt, "extra_data": extra_data}
    return job


def _bad(message: str) -> web.Response:
    return json_response({"error": message}, status=400)


def add_routes(routes: web.RouteTableDef, server: PromptServer) -> None:
    q = server.prompt_queue

    @routes.get("/jobs")
    async def get_jobs(request: web.Request) -> web.Response:
        query = request.rel_url.query
        wanted = [s.strip().lower() for s in query.get("status", "").split(",") if s.strip()] or list(STATUSES)
        invalid = [s for s in wanted if s not in STATUSES]
        if invalid:
            return _bad(f"Invalid status value(s): {', '.join(invalid)}. Valid values: {', '.join(STATUSES)}")
        sort_by = query.get("sort_by", "created_at").lower()
        sort_order = query.get("sort_order", "desc").lower()
        if sort_by not in ("created_at", "execution_duration"):
            return _bad("sort_by must be 'created_at' or 'execution_duration'")
        if sort_order not in ("asc", "desc"):
            return _bad("sort_order must be 'asc' or 'desc'")
        try:
            limit = int(query["limit"]) if "limit" in query else None
        except ValueError:
            return _bad("limit must be an integer")
        if limit is not None and limit <= 0:
            return _bad("limit must be a positive integer")
        try:
            offset = max(int(query.get("offset", 0)), 0)
        except ValueError:
            return _bad("offset must be an integer")
        running, pending = q.get_current_queue()
        jobs = []
        if "in_progress" in wanted:
            jobs += [queue_job(i, "in_progress") for i in running]
        if "pending" in wanted:
            jobs += [queue_job(i, "pending") for i in pending]
        if HISTORY_STATUSES & set(wanted):
            jobs += [j for pid, e in q.get_history().items() if (j := history_job(pid, e))["status"] in wanted]
        workflow_id = query.get("workflow_id")
        if workflow_id:
            jobs = [j for j in jobs if j.get("workflow_id") == workflow_id]

        def key(job: dict) -> float:
            if sort_by == "execution_duration":
                start, end = job.get("execution_start_time"), job.get("execution_end_time")
                return end - start if start and end else 0
            return job.get("create_time", 0)

        jobs.sort(key=key, reverse=sort_order == "desc")
        total = len(jobs)
        page = jobs[offset:] if limit is None else jobs[offset : offset + limit]
        # Without a `limit` the whole list is one page, and pagination says so with limit null (ComfyUI).
        return json_response(
            {
                "jobs": page,
                "pagination": {
                    "offset": offset,
                    "limit": limit,
                    "total": total,
                    "has_more": offset + len(page) < total,
                },
            }
        )

    @routes.get("/jobs/{job_id}")
    async def get_job(request: web.Request) -> web.Response:
        job_id = request.match_info["job_id"]
        history = q.get_history(prompt_id=job_id)
        if job_id in history:
            return json_response(history_job(job_id, history[job_id], detail=True))
        running, pending = q.get_current_queue()
        for status, items in (("in_progress", running), ("pending", pending)):
            for item in items:
                if item[1] == job_id:
                    return json_response(queue_job(item, status, detail=True))
        return json_response({"error": "Job not found"}, status=404)

    def cancel(job_id: str) -> bool:
        """Dequeue a pending job or interrupt the running one; finished/unknown ids are no-ops."""
        if q.delete_queue_item(lambda item: item.prompt_id == job_id):
            return True
        if job_id in q.running_prompt_ids():
            progress.interrupt(prompt_id=job_id)
            return True
        return False

    @routes.post("/jobs/{job_id}/cancel")
    async def cancel_job(request: web.Request) -> web.Response:
        return json_response({"cancelled": cancel(request.match_info["job_id"])})

    @routes.post("/jobs/cancel")
    async def cancel_jobs(request: web.Request) -> web.Response:
        body = await read_json(request)
        job_ids = body.get("job_ids") if isinstance(body, dict) else None
        if not isinstance(job_ids, list) or not all(isinstance(j, str) for j in job_ids):
            return _bad("job_ids must be a list of strings")
        results = [cancel(j) for j in job_ids]
        return json_response({"cancelled": any(results)})
