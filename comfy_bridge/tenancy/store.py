"""Durable state of a hosted server: tenants, API keys, login sessions, the prompt queue, history
and usage, in one SQLite file (WAL) in the workspace.

`Store` is the whole storage interface; the queue, the auth middleware and the CLI use nothing
else, so another backend (PostgreSQL for several heads) implements these methods. Thread-safe:
writes go through one connection behind a lock; other processes (the `tenants` CLI) share the file
through WAL. The lookups every request makes (its key or session, its tenant's record) read
through a second, read-only connection with its own lock: WAL lets it read while the worker
writes, so a request never waits behind the worker's transactions and WAL checkpoints (on the
event loop, that wait stalled every tenant's request at once). It reads the committed state of
the file each time, so a key revoked by another process fails at once.
Tenant "" owns the rows of the single-user server.
"""

from __future__ import annotations

import hmac
import json
import logging
import math
import os
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from comfy_bridge.server.prompt_queue import MAX_QUEUE_NUMBER, DuplicatePromptId, queue_number
from nodes.output_claims import Claim

from . import keys as keys_mod

log = logging.getLogger(__name__)

DB_NAME = "comfy_cluster.sqlite3"
TENANT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
LIMITS = (
    "max_queued",
    "max_concurrent",
    "max_prompt_bytes",
    "max_nodes",
    "max_upload_bytes",
    "max_storage_bytes",
    "max_text_chars",
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tenants (
    name TEXT PRIMARY KEY, weight REAL NOT NULL DEFAULT 1.0, created REAL NOT NULL,
    max_queued INTEGER, max_concurrent INTEGER, max_prompt_bytes INTEGER, max_nodes INTEGER,
    max_upload_bytes INTEGER, max_storage_bytes INTEGER, admin INTEGER NOT NULL DEFAULT 0, max_text_chars INTEGER);
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY, tenant TEXT NOT NULL, salt BLOB NOT NULL, hash BLOB NOT NULL, n INTEGER NOT NULL,
    created REAL NOT NULL, revoked REAL);
CREATE TABLE IF NOT EXISTS sessions (
    digest TEXT PRIMARY KEY, tenant TEXT NOT NULL, key_id TEXT NOT NULL, expires REAL NOT NULL);
CREATE TABLE IF NOT EXISTS queue (
    id INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL, prompt_id TEXT NOT NULL, number REAL NOT NULL,
    item TEXT NOT NULL, running INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS queue_tenant ON queue (tenant, running, number, id);
CREATE TABLE IF NOT EXISTS history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, prompt_id TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL, entry TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS history_tenant ON history (tenant, seq);
CREATE TABLE IF NOT EXISTS output_claims (
    task INTEGER NOT NULL, key TEXT NOT NULL, folder TEXT NOT NULL, stem TEXT NOT NULL, counter INTEGER NOT NULL,
    count INTEGER NOT NULL, PRIMARY KEY (task, key));
CREATE INDEX IF NOT EXISTS output_claims_name ON output_claims (folder, stem);
CREATE TABLE IF NOT EXISTS usage (
    tenant TEXT PRIMARY KEY, seconds REAL NOT NULL DEFAULT 0, prompts INTEGER NOT NULL DEFAULT 0,
    images INTEGER NOT NULL DEFAULT 0);
"""

# A prompt id names one prompt of one tenant, decided by the database itself (two heads' or threads'
# inserts race in it, never in a check before it): no two queued rows share one, and no tenant queues an
# id that another tenant's history holds, whose entry finishing it would replace. A tenant may re-use
# its own finished id (ComfyUI's re-run: the new entry replaces the old). Created after
# _unique_prompt_ids has made the rows of older stores satisfy them.
_PROMPT_ID_RULES = """
CREATE UNIQUE INDEX IF NOT EXISTS queue_prompt_id ON queue (prompt_id);
CREATE TRIGGER IF NOT EXISTS queue_prompt_id_owner BEFORE INSERT ON queue
WHEN EXISTS (SELECT 1 FROM history WHERE prompt_id = NEW.prompt_id AND tenant != NEW.tenant)
BEGIN SELECT RAISE(ABORT, 'prompt_id in use'); END;
"""


class StoreError(ValueError):
    """A request the store refuses (unknown tenant, bad name, duplicate)."""


@dataclass
class Tenant:
    name: str
    weight: float = 1.0
    max_queued: int | None = None
    max_concurrent: int | None = None
    max_prompt_bytes: int | None = None
    max_nodes: int | None = None
    max_upload_bytes: int | None = None
    max_storage_bytes: int | None = None
    max_text_chars: int | None = None  # longest string in a prompt's nodes (text encoders' cost grows with it)
    admin: bool = False  # may read every tenant's usage, /metrics, /cluster/stats and the operator routes

    def __post_init__(self) -> None:
        self.admin = bool(self.admin)  # SQLite hands back 0/1

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class QueueRow:
    id: int
    tenant: str
    prompt_id: str
    number: float
    item: list  # ComfyUI's 5-element public list
    running: bool


_TENANT_COLUMNS = ", ".join(f.name for f in fields(Tenant))


class Store:
    def __init__(self, path: str | Path, scrypt_n: int = keys_mod.HMAC_SHA256):
        """`scrypt_n`: how new keys are hashed (keys.HMAC_SHA256, or an older version's scrypt cost)."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.scrypt_n = scrypt_n
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=10.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # with WAL: durable across a killed process
        self._db.executescript(_SCHEMA)
        self._unique_prompt_ids()
        self._db.executescript(_PROMPT_ID_RULES)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(tenants)")}
        # Columns added since the first stores were written.
        for column, decl in (("admin", "INTEGER NOT NULL DEFAULT 0"), ("max_text_chars", "INTEGER")):
            if column not in columns:
                try:
                    self._db.execute(f"ALTER TABLE tenants ADD COLUMN {column} {decl}")
                except sqlite3.OperationalError:  # another process added it first
                    pass
        # The request-path lookups' connection (see the module's docstring), opened after the schema exists.
        self._read_lock = threading.Lock()
        self._reader = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=10.0)
        self._reader.execute("PRAGMA query_only = ON")
        self._verified: dict[str, str] = {}  # key id -> digest of a secret already checked against its hash
        if os.name == "posix":
            os.chmod(self.path, 0o600)

    def _unique_prompt_ids(self) -> None:
        """Give a new id to each queued row of an older store that breaks _PROMPT_ID_RULES (its id queued
        twice, or held by another tenant's history), logging each: the prompt still runs, and no
        tenant's finished entry is replaced by another's."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                clashes = self._db.execute(
                    "SELECT id, tenant, prompt_id, item FROM queue q WHERE EXISTS (SELECT 1 FROM queue p "
                    "WHERE p.prompt_id = q.prompt_id AND p.id < q.id) OR EXISTS (SELECT 1 FROM history h "
                    "WHERE h.prompt_id = q.prompt_id AND h.tenant != q.tenant)"
                ).fetchall()
                for row_id, tenant, prompt_id, text in clashes:
                    new_id = str(uuid.uuid4())
                    item = _load(text)
                    if isinstance(item, list) and len(item) > 1:
                        item[1] = new_id
                        text = json.dumps(item)
                    self._db.execute("UPDATE queue SET prompt_id = ?, item = ? WHERE id = ?", (new_id, text, row_id))
                    log.error(
                        "queued prompt %s of tenant %r shares its id with another prompt: now %s",
                        prompt_id,
                        tenant,
                        new_id,
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        with self._read_lock:
            self._reader.close()
        with self._lock:
            self._db.close()

    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _read(self, sql: str, args: tuple = ()) -> list[tuple]:
        """A read on the read-only connection: never waits for a write or a checkpoint of this process."""
        with self._read_lock:
            return self._reader.execute(sql, args).fetchall()

    def _exec(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._db.execute(sql, args)

    # -- tenants --------------------------------------------------------------------------
    def add_tenant(self, name: str, weight: float = 1.0, admin: bool = False, **limits: int | None) -> Tenant:
        if not TENANT_NAME.match(name):
            raise StoreError(f"invalid tenant name {name!r}: use 1-32 of a-z, 0-9, '_' and '-'")
        tenant = Tenant(name, _weight(weight), admin=admin, **_limits(limits))
        try:
            self._exec(
                f"INSERT INTO tenants ({_TENANT_COLUMNS}, created) VALUES "
                f"({', '.join('?' * (len(fields(Tenant)) + 1))})",
                (*asdict(tenant).values(), time.time()),
            )
        except sqlite3.IntegrityError:
            raise StoreError(f"tenant {name!r} already exists") from None
        return tenant

    def update_tenant(
        self, name: str, weight: float | None = None, admin: bool | None = None, **limits: int | None
    ) -> Tenant:
        """Change the weight, the admin flag and the given limits (a limit of 0 or less removes it)."""
        tenant = self.get_tenant(name)
        if tenant is None:
            raise StoreError(f"no tenant {name!r}")
        if weight is not None:
            tenant.weight = _weight(weight)
        if admin is not None:
            tenant.admin = bool(admin)
        for key, value in _limits(limits).items():
            setattr(tenant, key, value if value and value > 0 else None)
        sets = ", ".join(f"{f.name} = ?" for f in fields(Tenant)[1:])
        self._exec(f"UPDATE tenants SET {sets} WHERE name = ?", (*list(asdict(tenant).values())[1:], name))
        return tenant

    def remove_tenant(self, name: str) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            for table in ("tenants", "api_keys", "sessions", "queue"):
                column = "name" if table == "tenants" else "tenant"
                self._db.execute(f"DELETE FROM {table} WHERE {column} = ?", (name,))
            self._db.execute("COMMIT")
        self._verified.clear()

    def get_tenant(self, name: str) -> Tenant | None:
        rows = self._read(f"SELECT {_TENANT_COLUMNS} FROM tenants WHERE name = ?", (name,))
        return Tenant(*rows[0]) if rows else None

    def list_tenants(self) -> list[Tenant]:
        return [Tenant(*r) for r in self._rows(f"SELECT {_TENANT_COLUMNS} FROM tenants ORDER BY name")]

    def has_tenants(self) -> bool:
        return bool(self._read("SELECT 1 FROM tenants LIMIT 1"))

    # -- API keys -------------------------------------------------------------------------
    def create_key(self, tenant: str) -> str:
        """A new key for `tenant`; only its hash is kept, so this is the one time it is seen."""
        if self.get_tenant(tenant) is None:
            raise StoreError(f"no tenant {tenant!r}")
        key_id, secret, key = keys_mod.new_key()
        salt = os.urandom(16)
        self._exec(
            "INSERT INTO api_keys (id, tenant, salt, hash, n, created) VALUES (?, ?, ?, ?, ?, ?)",
            (key_id, tenant, salt, keys_mod.hash_secret(secret, salt, self.scrypt_n), self.scrypt_n, time.time()),
        )
        return key

    def list_keys(self, tenant: str | None = None) -> list[dict]:
        sql = "SELECT id, tenant, created, revoked FROM api_keys"
        rows = self._rows(
            sql + (" WHERE tenant = ?" if tenant else "") + " ORDER BY created", (tenant,) if tenant else ()
        )
        return [{"id": r[0], "tenant": r[1], "created": r[2], "revoked": r[3]} for r in rows]

    def revoke(self, tenant: str, key_id: str | None = None) -> int:
        """Revoke one key (or all keys) of `tenant` and end the sessions opened with them; returns the count."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            where, args = ("tenant = ? AND id = ?", (tenant, key_id)) if key_id else ("tenant = ?", (tenant,))
            count = self._db.execute(
                f"UPDATE api_keys SET revoked = ? WHERE {where} AND revoked IS NULL", (time.time(), *args)
            ).rowcount
            swhere = "tenant = ? AND key_id = ?" if key_id else "tenant = ?"
            self._db.execute(f"DELETE FROM sessions WHERE {swhere}", args)
            self._db.execute("COMMIT")
        self._verified.clear()
        return count

    def authenticate_key(self, key: str) -> tuple[str, str] | None:
        """(tenant, key id) for a valid, unrevoked key; None otherwise. The revocation check reads
        the database every time (another process may have revoked it); the hash check runs once
        per key and process."""
        return self._authenticate(key, verify=True)

    def verified_key(self, key: str) -> tuple[str, str] | None:
        """authenticate_key without hashing: the answer for a key this process has already verified
        (still unrevoked), None for any other (which then needs authenticate_key)."""
        return self._authenticate(key, verify=False)

    def _authenticate(self, key: str, verify: bool) -> tuple[str, str] | None:
        parts = keys_mod.split_key(key)
        if parts is None:
            return None
        key_id, secret = parts
        if not verify and key_id not in self._verified:
            return None
        rows = self._read(
            "SELECT k.tenant, k.salt, k.hash, k.n FROM api_keys k JOIN tenants t ON t.name = k.tenant "
            "WHERE k.id = ? AND k.revoked IS NULL",
            (key_id,),
        )
        if not rows:
            return None
        tenant, salt, expected, n = rows[0]
        digest = keys_mod.token_digest(secret)
        seen = self._verified.get(key_id)
        if seen is not None and hmac.compare_digest(seen, digest):
            return tenant, key_id
        if not verify or not keys_mod.verify_secret(secret, salt, expected, n):
            return None
        self._verified[key_id] = digest
        return tenant, key_id

    # -- login sessions -------------------------------------------------------------------
    def create_session(self, tenant: str, key_id: str, ttl_s: float) -> str:
        token = keys_mod.new_session_token()
        now = time.time()
        self._exec("DELETE FROM sessions WHERE expires < ?", (now,))
        self._exec(
            "INSERT INTO sessions (digest, tenant, key_id, expires) VALUES (?, ?, ?, ?)",
            (keys_mod.token_digest(token), tenant, key_id, now + ttl_s),
        )
        return token

    def session_tenant(self, token: str) -> str | None:
        rows = self._read(
            "SELECT s.tenant FROM sessions s JOIN api_keys k ON k.id = s.key_id "
            "WHERE s.digest = ? AND s.expires > ? AND k.revoked IS NULL",
            (keys_mod.token_digest(token), time.time()),
        )
        return rows[0][0] if rows else None

    def delete_session(self, token: str) -> None:
        self._exec("DELETE FROM sessions WHERE digest = ?", (keys_mod.token_digest(token),))

    # -- queue ----------------------------------------------------------------------------
    def queue_add(self, tenant: str, prompt_id: str, number: float, item: list) -> int:
        """The new row's id; DuplicatePromptId when the id is in use (_PROMPT_ID_RULES)."""
        try:
            return self._exec(
                "INSERT INTO queue (tenant, prompt_id, number, item) VALUES (?, ?, ?, ?)",
                (tenant, prompt_id, number, json.dumps(item)),
            ).lastrowid
        except sqlite3.IntegrityError:
            raise DuplicatePromptId(prompt_id) from None

    def queue_rows(self, tenant: str | None = None, running: bool | None = None) -> list[QueueRow]:
        """Rows in queue order (number, then arrival); `tenant` None means every tenant."""
        where, args = [], []
        if tenant is not None:
            where.append("tenant = ?")
            args.append(tenant)
        if running is not None:
            where.append("running = ?")
            args.append(int(running))
        sql = "SELECT id, tenant, prompt_id, number, item, running FROM queue"
        sql += (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY number, id"
        return [QueueRow(r[0], r[1], r[2], r[3], json.loads(r[4]), bool(r[5])) for r in self._rows(sql, tuple(args))]

    def queue_counts(self, tenant: str | None = None) -> tuple[int, int]:
        """(pending, running) of `tenant` (None: all)."""
        sql = "SELECT running, COUNT(*) FROM queue" + (" WHERE tenant = ?" if tenant is not None else "")
        counts = dict(self._rows(sql + " GROUP BY running", (tenant,) if tenant is not None else ()))
        return counts.get(0, 0), counts.get(1, 0)

    def running_by_tenant(self) -> dict[str, int]:
        return dict(self._rows("SELECT tenant, COUNT(*) FROM queue WHERE running = 1 GROUP BY tenant"))

    def pending_heads(self) -> list[QueueRow]:
        """The first pending row of every tenant."""
        rows = self._rows(
            "SELECT id, tenant, prompt_id, number, item, running FROM queue q WHERE running = 0 AND "
            "id = (SELECT id FROM queue p WHERE p.tenant = q.tenant AND p.running = 0 "
            "ORDER BY number, id LIMIT 1)"
        )
        return [QueueRow(r[0], r[1], r[2], r[3], json.loads(r[4]), False) for r in rows]

    def queue_claim(self, row_id: int) -> bool:
        return self._exec("UPDATE queue SET running = 1 WHERE id = ? AND running = 0", (row_id,)).rowcount == 1

    def queue_remove(self, row_id: int) -> None:
        self._exec("DELETE FROM queue WHERE id = ?", (row_id,))

    def queue_clear(self, tenant: str | None) -> None:
        if tenant is None:
            self._exec("DELETE FROM queue WHERE running = 0")
        else:
            self._exec("DELETE FROM queue WHERE running = 0 AND tenant = ?", (tenant,))

    def requeue_running(self) -> int:
        """After a restart: prompts that were running when the head died go back to pending (keeping the
        output names they claimed, see nodes.output_claims)."""
        self._exec("DELETE FROM output_claims WHERE task NOT IN (SELECT id FROM queue)")  # a removed tenant's
        return self._exec("UPDATE queue SET running = 0 WHERE running = 1").rowcount

    def claim_output(self, task: int, key: str, folder: str, stem: str, counter: int, count: int) -> Claim:
        """The output name queue row `task` claimed under `key`, or a new claim (see output_claims.ClaimBook)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(
                    "SELECT folder, stem, counter FROM output_claims WHERE task = ? AND key = ?", (task, key)
                ).fetchone()
                if row is None:
                    (end,) = self._db.execute(
                        "SELECT MAX(counter + count) FROM output_claims WHERE folder = ? AND stem = ? AND task != ?",
                        (folder, stem, task),
                    ).fetchone()
                    row = (folder, stem, max(counter, end or 0))
                    self._db.execute("INSERT INTO output_claims VALUES (?, ?, ?, ?, ?, ?)", (task, key, *row, count))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return Claim(*row)

    def max_number(self) -> float:
        """The highest queue number in range (see repair_queue for rows outside it); -1 when none."""
        rows = self._rows(
            "SELECT MAX(number) FROM queue WHERE number BETWEEN ? AND ?", (-MAX_QUEUE_NUMBER, MAX_QUEUE_NUMBER)
        )
        return rows[0][0] if rows and rows[0][0] is not None else -1

    def repair_queue(self) -> None:
        """At start-up, make every queued row servable, logging each change: a row whose item cannot be
        read is dropped; a number that is not finite or out of range (older versions took `"number":
        1e999`) becomes the next one after (or, negative, before) every valid number, which is what the
        client asked for. One bad row must neither stop the server from starting nor block a queue."""
        rows = []
        for row_id, tenant, prompt_id, number, text in self._rows(
            "SELECT id, tenant, prompt_id, number, item FROM queue ORDER BY id"
        ):
            item = _load(text)
            if (
                isinstance(item, list)
                and len(item) == 5
                and isinstance(item[2], dict)
                and isinstance(item[3], dict)
                and isinstance(item[4], list)
            ):
                rows.append((row_id, tenant, prompt_id, number, item))
            else:
                log.error("dropped queued prompt %s of tenant %r: its stored item is unreadable", prompt_id, tenant)
                self.queue_remove(row_id)
        valid = [n for *_, n, _ in rows if queue_number(n) is not None]
        low, high = min(valid, default=0), max(valid, default=-1)
        for row_id, tenant, prompt_id, number, item in rows:
            fixed = queue_number(number)
            if fixed is None:
                if isinstance(number, (int, float)) and number < 0:
                    low = fixed = low - 1
                else:
                    high = fixed = high + 1
                log.error("queued prompt %s of tenant %r had number %r: now %s", prompt_id, tenant, number, fixed)
            if fixed != number or item[0] != fixed:
                item[0] = fixed
                self._exec("UPDATE queue SET number = ?, item = ? WHERE id = ?", (fixed, json.dumps(item), row_id))

    def finish(self, row_id: int, prompt_id: str, tenant: str, entry: dict, max_history: int) -> list[str]:
        """Move a running row to history in one transaction, trimming the tenant's oldest entries; returns
        the prompt ids of those it trimmed."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM queue WHERE id = ?", (row_id,))
            self._db.execute("DELETE FROM output_claims WHERE task = ?", (row_id,))  # its files are written
            # the tenant's own earlier run of this id (_PROMPT_ID_RULES: no other tenant's entry has it)
            self._db.execute("DELETE FROM history WHERE prompt_id = ? AND tenant = ?", (prompt_id, tenant))
            self._db.execute(
                "INSERT INTO history (prompt_id, tenant, entry) VALUES (?, ?, ?)",
                (prompt_id, tenant, json.dumps(entry)),
            )
            old = "WHERE tenant = ? AND seq NOT IN (SELECT seq FROM history WHERE tenant = ? ORDER BY seq DESC LIMIT ?)"
            trimmed = [
                pid
                for (pid,) in self._db.execute(f"SELECT prompt_id FROM history {old}", (tenant, tenant, max_history))
            ]
            self._db.execute(f"DELETE FROM history {old}", (tenant, tenant, max_history))
            self._db.execute("COMMIT")
        return trimmed

    # -- history --------------------------------------------------------------------------
    def history(
        self, tenant: str | None, prompt_id: str | None = None, max_items: int | None = None, offset: int = -1
    ) -> dict[str, dict]:
        """ComfyUI's paging: offset < 0 with max_items means the newest max_items entries."""
        where, args = ("WHERE tenant = ?", [tenant]) if tenant is not None else ("", [])
        if prompt_id is not None:
            where = (where + " AND" if where else "WHERE") + " prompt_id = ?"
            args.append(prompt_id)
        if offset < 0 and max_items is not None:
            total = self._rows(f"SELECT COUNT(*) FROM history {where}", tuple(args))[0][0]
            offset = total - max_items
        offset = max(offset, 0)
        limit = max_items if max_items is not None else -1
        rows = self._rows(
            f"SELECT prompt_id, entry FROM history {where} ORDER BY seq LIMIT ? OFFSET ?", (*args, limit, offset)
        )
        entries = {pid: _load(entry) for pid, entry in rows}
        for pid in [pid for pid, entry in entries.items() if entry is None]:
            log.error("history entry %s is unreadable: left out", pid)
            del entries[pid]
        return entries

    def history_delete(self, tenant: str | None, prompt_id: str | None = None) -> None:
        where, args = [], []
        if tenant is not None:
            where.append("tenant = ?")
            args.append(tenant)
        if prompt_id is not None:
            where.append("prompt_id = ?")
            args.append(prompt_id)
        self._exec("DELETE FROM history" + (" WHERE " + " AND ".join(where) if where else ""), tuple(args))

    # -- usage ----------------------------------------------------------------------------
    def add_usage(self, tenant: str, seconds: float, images: int) -> None:
        self._exec(
            "INSERT INTO usage (tenant, seconds, prompts, images) VALUES (?, ?, 1, ?) ON CONFLICT(tenant) "
            "DO UPDATE SET seconds = seconds + excluded.seconds, prompts = prompts + 1, "
            "images = images + excluded.images",
            (tenant, seconds, images),
        )

    def usage(self, tenant: str) -> dict[str, Any]:
        rows = self._rows("SELECT seconds, prompts, images FROM usage WHERE tenant = ?", (tenant,))
        seconds, prompts, images = rows[0] if rows else (0.0, 0, 0)
        return {"seconds": seconds, "prompts": prompts, "images": images}

    def all_usage(self) -> Iterator[tuple[str, dict]]:
        for tenant, seconds, prompts, images in self._rows("SELECT tenant, seconds, prompts, images FROM usage"):
            yield tenant, {"seconds": seconds, "prompts": prompts, "images": images}


def _load(text: str) -> Any:
    """A stored JSON value, None when it cannot be read."""
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return None


def _weight(value: float) -> float:
    weight = float(value)
    if not (math.isfinite(weight) and weight > 0):
        raise StoreError(f"weight must be a positive number, not {value!r}")
    return weight


def _limits(limits: dict) -> dict:
    unknown = set(limits) - set(LIMITS)
    if unknown:
        raise StoreError(f"unknown limits: {', '.join(sorted(unknown))}")
    return {k: (int(v) if v is not None else None) for k, v in limits.items()}
