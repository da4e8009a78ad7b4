"""Durable records of Comfy API v2: jobs, assets and claimed idempotency keys, in the hosted server's
SQLite file (the one that holds its queue and history), so they survive a restart of the head.

A v2 job is also a prompt of the ordinary queue (same id): the queue and history say where it is;
this table keeps what v2 adds (creation and retention times, labels, the executed graph, cancel
requests) and, once the job ends, its terminal state, so the answer no longer depends on history.
An asset is a record over a file in one of the tenant's folders: uploads in its input folder,
outputs where the job saved them, models in its model folder. Several records may share one file.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS v2_jobs (
    id TEXT PRIMARY KEY, tenant TEXT NOT NULL, created REAL NOT NULL, expires REAL NOT NULL,
    workflow TEXT NOT NULL, metadata TEXT, nodes INTEGER NOT NULL, started REAL, completed REAL,
    status TEXT, error TEXT, cancel_requested INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS v2_jobs_tenant ON v2_jobs (tenant, created, id);
CREATE TABLE IF NOT EXISTS v2_claims (
    tenant TEXT NOT NULL, scope TEXT NOT NULL, key TEXT NOT NULL, claimed REAL NOT NULL,
    PRIMARY KEY (tenant, scope, key));
CREATE TABLE IF NOT EXISTS v2_assets (
    id TEXT PRIMARY KEY, tenant TEXT NOT NULL, hash TEXT, size INTEGER NOT NULL, content_type TEXT NOT NULL,
    file_path TEXT, created REAL NOT NULL, expires REAL, job_id TEXT, node_id TEXT, kind TEXT NOT NULL,
    folder TEXT NOT NULL, name TEXT NOT NULL, tags TEXT);
CREATE INDEX IF NOT EXISTS v2_assets_hash ON v2_assets (tenant, hash);
CREATE INDEX IF NOT EXISTS v2_assets_job ON v2_assets (job_id);
"""

# Everything but the workflow, which only GET .../workflow reads.
_JOB_COLUMNS = (
    "id",
    "tenant",
    "created",
    "expires",
    "metadata",
    "nodes",
    "started",
    "completed",
    "status",
    "error",
    "cancel_requested",
)
_ASSET_COLUMNS = (
    "id",
    "tenant",
    "hash",
    "size",
    "content_type",
    "file_path",
    "created",
    "expires",
    "job_id",
    "node_id",
    "kind",
    "folder",
    "name",
    "tags",
)
TERMINAL = ("succeeded", "failed", "canceled", "expired")


class V2Store:
    def __init__(self, path: str | Path):
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=10.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _exec(self, sql: str, args: tuple = ()) -> int:
        with self._lock:
            return self._db.execute(sql, args).rowcount

    # -- idempotency keys -----------------------------------------------------------------
    def claim(self, tenant: str, scope: str, key: str, ttl_s: float) -> bool:
        """Claim `key` for one request of `tenant`; False when it was claimed within `ttl_s`."""
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("DELETE FROM v2_claims WHERE claimed < ?", (now - ttl_s,))
                taken = (
                    self._db.execute(
                        "INSERT OR IGNORE INTO v2_claims VALUES (?, ?, ?, ?)", (tenant, scope, key, now)
                    ).rowcount
                    == 1
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return taken

    def release(self, tenant: str, scope: str, key: str) -> None:
        """Give a key back: the request that claimed it definitely created nothing."""
        self._exec("DELETE FROM v2_claims WHERE tenant = ? AND scope = ? AND key = ?", (tenant, scope, key))

    # -- jobs -----------------------------------------------------------------------------
    def add_job(
        self, job_id: str, tenant: str, created: float, expires: float, workflow: dict, metadata: dict | None
    ) -> None:
        self._exec(
            "INSERT INTO v2_jobs (id, tenant, created, expires, workflow, metadata, nodes) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (job_id, tenant, created, expires, json.dumps(workflow), json.dumps(metadata or {}), len(workflow)),
        )

    def job(self, tenant: str, job_id: str) -> dict | None:
        """The tenant's job (without its workflow), None for another tenant's or an unknown id."""
        rows = self._rows(
            f"SELECT {', '.join(_JOB_COLUMNS)} FROM v2_jobs WHERE id = ? AND tenant = ?", (job_id, tenant)
        )
        return _job(rows[0]) if rows else None

    def job_by_id(self, job_id: str) -> dict | None:
        rows = self._rows(f"SELECT {', '.join(_JOB_COLUMNS)} FROM v2_jobs WHERE id = ?", (job_id,))
        return _job(rows[0]) if rows else None

    def workflow(self, tenant: str, job_id: str) -> dict | None:
        rows = self._rows("SELECT workflow FROM v2_jobs WHERE id = ? AND tenant = ?", (job_id, tenant))
        return json.loads(rows[0][0]) if rows else None

    def jobs(self, tenant: str, limit: int, before: tuple[float, str] | None = None) -> list[dict]:
        """The tenant's jobs, newest first, from after the keyset cursor `before` = (created, id)."""
        sql = f"SELECT {', '.join(_JOB_COLUMNS)} FROM v2_jobs WHERE tenant = ?"
        args: tuple = (tenant,)
        if before is not None:
            sql += " AND (created < ? OR (created = ? AND id < ?))"
            args += (before[0], before[0], before[1])
        rows = self._rows(sql + " ORDER BY created DESC, id DESC LIMIT ?", args + (limit,))
        return [_job(r) for r in rows]

    def open_jobs(self) -> list[dict]:
        """Every job not yet in a terminal state (all tenants)."""
        rows = self._rows(f"SELECT {', '.join(_JOB_COLUMNS)} FROM v2_jobs WHERE status IS NULL")
        return [_job(r) for r in rows]

    def set_started(self, job_id: str, started: float) -> None:
        self._exec("UPDATE v2_jobs SET started = ? WHERE id = ? AND started IS NULL", (started, job_id))

    def request_cancel(self, job_id: str) -> None:
        self._exec("UPDATE v2_jobs SET cancel_requested = 1 WHERE id = ?", (job_id,))

    def finish(self, job_id: str, status: str, completed: float, started: float | None, error: dict | None) -> bool:
        """Record the terminal state once; False when the job had one already."""
        return (
            self._exec(
                "UPDATE v2_jobs SET status = ?, completed = ?, started = COALESCE(started, ?), error = ? "
                "WHERE id = ? AND status IS NULL",
                (status, completed, started, json.dumps(error) if error else None, job_id),
            )
            == 1
        )

    def expired_jobs(self, now: float) -> list[tuple[str, str]]:
        return self._rows("SELECT id, tenant FROM v2_jobs WHERE expires < ?", (now,))

    def delete_job(self, job_id: str) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM v2_assets WHERE job_id = ?", (job_id,))
            self._db.execute("DELETE FROM v2_jobs WHERE id = ?", (job_id,))
            self._db.execute("COMMIT")

    # -- assets ---------------------------------------------------------------------------
    def add_asset(self, asset: dict) -> bool:
        """Insert an asset record; False when its id exists (outputs have ids derived from the job)."""
        values = tuple(json.dumps(asset.get("tags") or []) if c == "tags" else asset.get(c) for c in _ASSET_COLUMNS)
        return (
            self._exec(
                f"INSERT OR IGNORE INTO v2_assets ({', '.join(_ASSET_COLUMNS)}) VALUES "
                f"({', '.join('?' * len(_ASSET_COLUMNS))})",
                values,
            )
            == 1
        )

    def asset(self, tenant: str, asset_id: str, now: float) -> dict | None:
        rows = self._rows(
            f"SELECT {', '.join(_ASSET_COLUMNS)} FROM v2_assets WHERE id = ? AND tenant = ? "
            "AND (expires IS NULL OR expires >= ?)",
            (asset_id, tenant, now),
        )
        return _asset(rows[0]) if rows else None

    def asset_by_hash(self, tenant: str, hash_: str, now: float) -> dict | None:
        """The tenant's newest live asset over these bytes (the blob it may mint from)."""
        rows = self._rows(
            f"SELECT {', '.join(_ASSET_COLUMNS)} FROM v2_assets WHERE tenant = ? AND hash = ? "
            "AND (expires IS NULL OR expires >= ?) ORDER BY created DESC LIMIT 1",
            (tenant, hash_, now),
        )
        return _asset(rows[0]) if rows else None

    def job_assets(self, job_id: str) -> list[dict]:
        rows = self._rows(
            f"SELECT {', '.join(_ASSET_COLUMNS)} FROM v2_assets WHERE job_id = ? ORDER BY rowid", (job_id,)
        )
        return [_asset(r) for r in rows]

    def extend_asset(self, asset_id: str, expires: float | None) -> None:
        """Re-referencing content extends its retention, never shortens it (None: never expires)."""
        if expires is None:
            self._exec("UPDATE v2_assets SET expires = NULL WHERE id = ?", (asset_id,))
        else:
            self._exec(
                "UPDATE v2_assets SET expires = MAX(expires, ?) WHERE id = ? AND expires IS NOT NULL",
                (expires, asset_id),
            )

    def delete_asset(self, asset_id: str) -> None:
        self._exec("DELETE FROM v2_assets WHERE id = ?", (asset_id,))

    def file_users(self, tenant: str, folder: str, name: str) -> int:
        """How many records of the tenant stand over this file."""
        return self._rows(
            "SELECT COUNT(*) FROM v2_assets WHERE tenant = ? AND folder = ? AND name = ?", (tenant, folder, name)
        )[0][0]

    def expired_assets(self, now: float) -> list[dict]:
        rows = self._rows(f"SELECT {', '.join(_ASSET_COLUMNS)} FROM v2_assets WHERE expires < ?", (now,))
        return [_asset(r) for r in rows]


def _job(row: tuple) -> dict:
    job = dict(zip(_JOB_COLUMNS, row))
    job["metadata"] = json.loads(job["metadata"] or "{}")
    job["error"] = json.loads(job["error"]) if job["error"] else None
    job["cancel_requested"] = bool(job["cancel_requested"])
    return job


def _asset(row: tuple) -> dict:
    asset = dict(zip(_ASSET_COLUMNS, row))
    asset["tags"] = json.loads(asset["tags"] or "[]")
    return asset
