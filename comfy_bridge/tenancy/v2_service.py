"""Comfy API v2 on the hosted server: jobs that are prompts of the ordinary (durable, per-tenant)
queue, their state, outputs and events, and the tenant's assets.

Every method acts for an explicit tenant ("" is the single user of a server with no tenant) and
runs its queue and history reads in that tenant's scope, exactly as the v1 routes do, so a tenant
reaches only its own jobs, assets, outputs and events. Methods here block (SQLite, files): routes
call them in a thread; `observe` runs in the engine's worker thread."""

from __future__ import annotations

import logging
import posixpath
import time
import uuid
from pathlib import Path
from typing import Any

import blake3

from comfy_bridge.compat.protocol import BinaryEventTypes
from comfy_bridge.server.prompt_queue import QueueItem
from comfy_bridge.server.view import type_dir
from nodes import progress as progress_mod
from nodes.safe_paths import UnsafePath, safe_join

from . import tenant_context as context
from .v2_live import Hub, JobProgress, client_id, job_of
from .v2_store import V2Store
from .v2_views import content_type_of, job_json, list_item, terminal_state

log = logging.getLogger(__name__)

JOB_RETENTION_S = 24 * 3600  # the reference proxy's; a job, its workflow and its outputs' records
_OUTPUT_NAMESPACE = uuid.UUID("6f1c1b0e-6d1a-4c55-9a53-7c1f3f0f2a11")
MODEL_PREFIX = "model:"  # an asset's folder for a file in the tenant's model folder (model:loras)
_PREVIEWS = (BinaryEventTypes.PREVIEW_IMAGE, BinaryEventTypes.UNENCODED_PREVIEW_IMAGE)


def file_hash(path: Path) -> str:
    digest = blake3.blake3()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return "blake3:" + digest.hexdigest()


def output_asset_id(job_id: str, node_id: str, type_: str, name: str) -> str:
    """Stable across polls and restarts: the same output of the same job is always the same asset."""
    return str(uuid.uuid5(_OUTPUT_NAMESPACE, f"{job_id}\0{node_id}\0{type_}\0{name}"))


class V2Service:
    def __init__(self, server: Any, db_path: Path, job_retention_s: float = JOB_RETENTION_S):
        self.server = server
        self.store = V2Store(db_path)
        self.hub = Hub()
        self.job_retention_s = job_retention_s
        self.sweeper: Any = None  # the retention sweep's task (v2_install)

    @property
    def queue(self) -> Any:
        return self.server.prompt_queue

    @property
    def workspace(self) -> Any:
        return self.server.workspace

    # -- submission -----------------------------------------------------------------------
    def create_job(
        self,
        tenant: str,
        job_id: str,
        number: float,
        workflow: dict,
        outputs: list,
        metadata: dict | None,
        sensitive: dict,
    ) -> dict:
        """Record the job, then queue its prompt (a head killed in between leaves a job that reads as
        failed, never a prompt v2 cannot see)."""
        now = time.time()
        self.store.add_job(job_id, tenant, now, now + self.job_retention_s, workflow, metadata)
        self.hub.track(job_id, tenant, workflow)
        extra = {"client_id": client_id(job_id), "create_time": int(now * 1000), "api": "v2"}
        with context.scoped(tenant or None):
            self.queue.put(QueueItem(number, job_id, workflow, extra, outputs, sensitive or None))
        return self.store.job(tenant, job_id)

    # -- state ----------------------------------------------------------------------------
    def state(self, job: dict) -> dict:
        """status, queue_position, progress, started, completed, error of a job: its terminal record,
        else where the queue has it, else (finished, not yet recorded) its history entry."""
        if job["status"] is not None:
            return {
                "status": job["status"],
                "started": job["started"],
                "completed": job["completed"],
                "error": job["error"],
                "progress": self._final_progress(job),
            }
        job_id = job["id"]
        with context.scoped(job["tenant"] or None):
            running, pending = self.queue.get_current_queue()
            if any(item[1] == job_id for item in running):
                live = self.hub.progress(job_id)
                return {
                    "status": "canceling" if job["cancel_requested"] else "running",
                    "started": job["started"],
                    "progress": live.latest()[1] if live is not None else None,
                }
            for index, item in enumerate(pending):
                if item[1] == job_id:
                    return {"status": "queued", "queue_position": index + 1}
            entry = self.queue.get_history(prompt_id=job_id).get(job_id)
        if entry is not None:
            return self.finish(job_id, entry) or self.state(self.store.job_by_id(job_id))
        if job["cancel_requested"]:
            self.store.finish(job_id, "canceled", time.time(), None, None)
        else:
            self.store.finish(
                job_id,
                "failed",
                time.time(),
                None,
                {
                    "code": "job_lost",
                    "message": "The job left the queue without running (deleted through the "
                    "queue routes, or the server stopped before queueing it).",
                    "node_id": None,
                    "class_type": None,
                    "traceback": None,
                },
            )
        return self.state(self.store.job_by_id(job_id))

    def _final_progress(self, job: dict) -> dict | None:
        if job["status"] != "succeeded":
            return None
        return {
            "value": 1.0,
            "nodes_done": job["nodes"],
            "nodes_total": job["nodes"],
            "current_node": None,
            "current_node_class": None,
            "step": None,
            "steps": None,
            "message": None,
        }

    def job_view(self, tenant: str, job_id: str, base: str) -> dict | None:
        job = self.store.job(tenant, job_id)
        if job is None or job["expires"] < time.time():
            return None
        return job_json(job, self.state(job), self.store.job_assets(job_id), base)

    def list_jobs(
        self,
        tenant: str,
        limit: int,
        before: tuple[float, str] | None,
        statuses: set[str] | None,
        labels: list[tuple[str, str]],
        base: str,
    ) -> tuple[list[dict], tuple[float, str] | None]:
        """One page of the tenant's jobs, newest first, and the cursor of the next page (None: last).
        Filters apply before paging, so a page is full unless the jobs ran out."""
        now, items, cursor = time.time(), [], before
        while len(items) < limit:
            batch = self.store.jobs(tenant, limit, cursor)
            for job in batch:
                cursor = (job["created"], job["id"])
                if job["expires"] < now or any(job["metadata"].get(k) != v for k, v in labels):
                    continue
                state = self.state(job)
                if statuses is None or state["status"] in statuses:
                    items.append(list_item(job, state, base))
                    if len(items) == limit:
                        break
            if len(batch) < limit:
                return items, None
        more = self.store.jobs(tenant, 1, cursor)
        return items, cursor if more else None

    def workflow(self, tenant: str, job_id: str) -> dict | None:
        job = self.store.job(tenant, job_id)
        return self.store.workflow(tenant, job_id) if job is not None and job["expires"] >= time.time() else None

    # -- cancel ---------------------------------------------------------------------------
    def cancel(self, tenant: str, job_id: str, base: str) -> dict | None:
        """Cancel this job only: a queued one leaves the queue, a running one is interrupted at its next
        node or step. A finished one is left as it is."""
        job = self.store.job(tenant, job_id)
        if job is None or job["expires"] < time.time():
            return None
        if job["status"] is None:
            self.store.request_cancel(job_id)
            with context.scoped(tenant or None):
                removed = self.queue.delete_queue_item(lambda item: item.prompt_id == job_id)
                if not removed and job_id in self.queue.running_prompt_ids():
                    progress_mod.interrupt(prompt_id=job_id)
                    self.hub.publish(job_id, "status", {"status": "canceling", "queue_position": None})
            if removed and self.store.finish(job_id, "canceled", time.time(), None, None):
                self.hub.forget(job_id)
                self.hub.publish(job_id, "status", {"status": "canceled", "queue_position": None})
        return self.job_view(tenant, job_id, base)

    def drop_canceled(self) -> None:
        """At start-up: a job whose cancel was asked for before the head stopped does not run again."""
        for job in self.store.open_jobs():
            if job["cancel_requested"]:
                with context.scoped(job["tenant"] or None):
                    self.queue.delete_queue_item(lambda item, pid=job["id"]: item.prompt_id == pid)

    # -- the engine's messages --------------------------------------------------------------
    def observe(self, event: Any, data: Any, sid: Any) -> None:
        """Every message the server sends passes here (any thread); a v2 job's feed its stream. Only the
        job's own prompt speaks for it: a message must come from the job's tenant and, where it names a
        prompt, name the job (a v1 prompt given the client id `v2-<id>` reaches no job's stream)."""
        job_id = job_of(sid)
        if job_id is None or (isinstance(data, dict) and data.get("prompt_id") != job_id):
            return
        try:
            self._observe(job_id, context.current() or "", event, data)
        except Exception:  # the stream is best-effort: never fail the engine
            log.exception("v2 event %s of job %s", event, job_id)

    def _observe(self, job_id: str, tenant: str, event: Any, data: Any) -> None:
        hub = self.hub
        live = hub.progress(job_id)
        if live is None:
            job = self.store.job_by_id(job_id)
            if job is None:
                return
            live = hub.track(job_id, job["tenant"], self.store.workflow(job["tenant"], job_id) or {})
        if live.tenant != tenant:
            return
        if event in _PREVIEWS:
            live.preview = (live.current, data)
            hub.publish(job_id, "preview", live.preview)
            return
        if not isinstance(data, dict):
            return
        with live.lock:  # the change and its sequence number together (see JobProgress.latest)
            self._apply(job_id, live, event, data)

    def _apply(self, job_id: str, live: JobProgress, event: str, data: dict) -> None:
        """One engine message's change to the job's progress, published to its stream."""
        if event == "execution_start":
            started = data.get("timestamp", time.time() * 1000) / 1000
            self.store.set_started(job_id, started)
            self.hub.publish(job_id, "status", {"status": "running", "queue_position": None})
        elif event == "execution_cached":
            live.done.update(str(n) for n in data.get("nodes") or [])
        elif event == "executing":
            if data.get("node") is None:  # the worker's last word: the prompt is in history now
                self.finish(job_id)
                return
            live.node_started(str(data["node"]))
        elif event == "progress":
            node = str(data.get("node"))
            if node != live.current:
                live.node_started(node)
            live.step, live.steps = int(data.get("value", 0)), int(data.get("max", 0))
        elif event == "executed":
            live.node_finished(str(data.get("node")))
            job = self.store.job_by_id(job_id)
            if job is not None:
                for row in self.record_outputs(job, {str(data.get("node")): data.get("output")}):
                    self.hub.publish(job_id, "output", row)
        else:
            return
        self.hub.publish(job_id, "progress", live.advance())

    def finish(self, job_id: str, entry: dict | None = None) -> dict | None:
        """Record a finished prompt's terminal state and outputs (once); its state, or None when it had
        one already or is not finished."""
        job = self.store.job_by_id(job_id)
        if job is None or job["status"] is not None:
            return None
        if entry is None:
            with context.scoped(job["tenant"] or None):
                entry = self.queue.get_history(prompt_id=job_id).get(job_id)
            if entry is None:
                return None
        self.record_outputs(job, entry.get("outputs") or {})
        state = terminal_state(entry)
        if state["status"] == "canceled" and not job["cancel_requested"]:
            # Interrupted, but not by a v2 cancel (the server stopping, /interrupt): it did not finish.
            state.update(
                status="failed",
                error={
                    "code": "interrupted",
                    "message": "The job was interrupted before it finished.",
                    "node_id": None,
                    "class_type": None,
                    "traceback": None,
                },
            )
        if not self.store.finish(
            job_id, state["status"], state["completed"] or time.time(), state["started"], state["error"]
        ):
            return None
        self.hub.forget(job_id)
        self.hub.publish(job_id, "status", {"status": state["status"], "queue_position": None})
        return state

    def record_outputs(self, job: dict, outputs: dict) -> list[dict]:
        """Asset records for the files a job's nodes produced; the ones new to the store."""
        new = []
        with context.scoped(job["tenant"] or None):
            for node_id, node_out in outputs.items():
                if not isinstance(node_out, dict):
                    continue
                for items in node_out.values():
                    for item in items if isinstance(items, list) else ():
                        row = self._output_row(job, str(node_id), item)
                        if row is not None and self.store.add_asset(row):
                            new.append(row)
        return new

    def _output_row(self, job: dict, node_id: str, item: Any) -> dict | None:
        if not isinstance(item, dict) or not isinstance(item.get("filename"), str):
            return None
        type_, subfolder = str(item.get("type") or "output"), str(item.get("subfolder") or "")
        base = type_dir(self.workspace, type_)
        if base is None:
            return None
        try:
            path = safe_join(base, subfolder, item["filename"])
        except UnsafePath:
            return None
        if not path.is_file():
            return None
        name = posixpath.join(subfolder, item["filename"]) if subfolder else item["filename"]
        return {
            "id": output_asset_id(job["id"], node_id, type_, name),
            "tenant": job["tenant"],
            "hash": file_hash(path),
            "size": path.stat().st_size,
            "content_type": content_type_of(name),
            "file_path": name,
            "created": time.time(),
            "expires": job["expires"],
            "job_id": job["id"],
            "node_id": node_id,
            "kind": "output",
            "folder": type_,
            "name": name,
            "tags": ["output"],
        }

    # -- retention --------------------------------------------------------------------------
    def purge(self) -> int:
        """Forget jobs and assets past their retention; an uploaded file goes with its last record."""
        now, count = time.time(), 0
        for job_id, _ in self.store.expired_jobs(now):
            self.store.delete_job(job_id)
            self.hub.forget(job_id)
            count += 1
        for asset in self.store.expired_assets(now):
            self.store.delete_asset(asset["id"])
            if asset["kind"] in ("upload", "model"):  # files v2 placed (v2_assets.OWNING_KINDS)
                self.remove_file_if_unused(asset)
            count += 1
        return count

    def asset_path(self, asset: dict) -> Path | None:
        """The file an asset stands over, in its tenant's folders; None when it is gone."""
        folder = asset["folder"]
        if folder.startswith(MODEL_PREFIX):  # the tenant's own model folder
            base = self.model_dir(asset["tenant"], folder[len(MODEL_PREFIX) :])
        else:
            with context.scoped(asset["tenant"] or None):
                base = type_dir(self.workspace, folder)
        if base is None:
            return None
        try:
            path = safe_join(base, asset["name"])
        except UnsafePath:
            return None
        return path if path.is_file() else None

    def model_dir(self, tenant: str, folder: str) -> Path:
        """Where a tenant's uploaded models of `folder` go: its own model folder (the single user of a
        server with no tenant, the operator, uploads into the shared one)."""
        if tenant:
            return self.workspace.tenant_models_dir(tenant, folder)
        with context.scoped(None):
            return self.workspace.folder_paths(folder)[0]

    def remove_file_if_unused(self, asset: dict) -> None:
        if self.store.file_users(asset["tenant"], asset["folder"], asset["name"]) == 0:
            path = self.asset_path(asset)
            if path is not None:
                path.unlink(missing_ok=True)
