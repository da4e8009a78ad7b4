"""The index behind the local assets API (/api/assets): one SQLite record per asset over a file in the
workspace's model folders, input or output folder, with the name, tags and metadata a client gave it.

Records are per tenant ("" on a server with no tenant); every folder is read as the calling context sees
it, so a hosted tenant indexes its own input/output folders, the operator's shared model folders and its
own model folder, never another tenant's files. A scan (`sync`) adds a record for each file that has
none, marks records whose file is gone `missing` (restored when it reappears) and refreshes what the
file says about itself (size, tags). A record deleted through the API leaves its file alone (as in
ComfyUI); the path is remembered so list scans do not bring it back, until an explicit seed does.
Everything here blocks (files, SQLite): routes call it in a thread, in the tenant's context.
"""

from __future__ import annotations

import json
import mimetypes
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOTS = ("models", "input", "output")  # what a seed scans (ComfyUI's seeder roots)
LISTED = (*ROOTS, "temp")  # what a listing brings up to date: previews are outputs too (tags_any=output,temp)
# Folder keys of the workspace table whose files are not models (ComfyUI leaves out configs and
# custom_nodes; our table also has the datasets and fonts folders of the training and text nodes).
NON_MODEL_FOLDERS = frozenset({"configs", "custom_nodes", "datasets", "fonts"})
# Input subfolders the web UI writes to, tagged as ComfyUI tags them (files directly inside only).
KNOWN_INPUT_SUBFOLDERS = frozenset({"3d", "pasted", "painter", "threed", "webcam"})
MISSING = "missing"
MODEL_TYPE = "model_type:"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS local_assets (
    id TEXT PRIMARY KEY, tenant TEXT NOT NULL, root TEXT NOT NULL, path TEXT NOT NULL, name TEXT NOT NULL,
    loader_path TEXT, display_name TEXT, hash TEXT, size INTEGER NOT NULL, mtime REAL, mime_type TEXT,
    system_tags TEXT NOT NULL, tags TEXT NOT NULL, user_metadata TEXT NOT NULL, preview_id TEXT, job_id TEXT,
    created REAL NOT NULL, updated REAL NOT NULL, accessed REAL NOT NULL, missing INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS local_assets_path ON local_assets (tenant, path);
CREATE INDEX IF NOT EXISTS local_assets_hash ON local_assets (tenant, hash);
CREATE TABLE IF NOT EXISTS local_assets_hidden (tenant TEXT NOT NULL, path TEXT NOT NULL,
    PRIMARY KEY (tenant, path));
"""
_COLUMNS = (
    "id",
    "tenant",
    "root",
    "path",
    "name",
    "loader_path",
    "display_name",
    "hash",
    "size",
    "mtime",
    "mime_type",
    "system_tags",
    "tags",
    "user_metadata",
    "preview_id",
    "job_id",
    "created",
    "updated",
    "accessed",
    "missing",
)
_JSON = ("system_tags", "tags", "user_metadata")


@dataclass
class FileFacts:
    """What a file's place says about it: its root, tags and the paths a client sees."""

    root: str
    system_tags: list[str]
    loader_path: str
    display_name: str
    size: int
    mtime: float


def model_folders(workspace: Any) -> dict[str, tuple[list[Path], set[str]]]:
    """Model folder key -> (its paths as the calling context sees them, the extensions it lists)."""
    out = {}
    for key in list(workspace.folder_names_and_paths):
        exts = workspace.folder_extensions(key)
        if key in NON_MODEL_FOLDERS or "folder" in exts:
            continue
        out[key] = (workspace.folder_paths(key), exts)
    return out


def _walk(base: Path) -> Iterable[tuple[str, str, os.stat_result]]:
    """(absolute path, path relative to `base` with /, its stat) of every file under `base`, hidden ones
    and hidden folders left out. Plain strings and scandir's stat: a model folder may hold thousands."""
    if not base.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(base, followlinks=True):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        rel_dir = os.path.relpath(dirpath, base).replace(os.sep, "/")
        prefix = "" if rel_dir == "." else rel_dir + "/"
        for fn in filenames:
            if fn.startswith("."):
                continue
            path = os.path.join(dirpath, fn)
            try:
                st = os.stat(path)
            except OSError:  # removed while walking, or a broken link
                continue
            yield path, prefix + fn, st


def scan(workspace: Any, roots: Iterable[str]) -> dict[str, FileFacts]:
    """Every indexable file under `roots` (absolute path -> facts), as the calling context sees them."""
    found: dict[str, FileFacts] = {}
    for root in roots:
        if root == "models":
            for key, (bases, exts) in model_folders(workspace).items():
                for base in bases:
                    for path, rel, st in _walk(base):
                        if exts and os.path.splitext(path)[1].lower() not in exts:
                            continue
                        facts = found.get(path)
                        if facts is None:
                            facts = found[path] = FileFacts(
                                "models", ["models"], rel, f"{base.name}/{rel}", st.st_size, st.st_mtime
                            )
                        if MODEL_TYPE + key not in facts.system_tags:
                            facts.system_tags.append(MODEL_TYPE + key)
            continue
        base = Path({"input": workspace.input_dir, "output": workspace.output_dir, "temp": workspace.temp_dir}[root])
        for path, rel, st in _walk(base):
            found[path] = FileFacts(root, path_tags(root, rel), rel, rel, st.st_size, st.st_mtime)
    return found


def roots_for(all_: list[str], any_: list[str]) -> tuple[str, ...]:
    """The roots whose records a tag filter can match (the web UI polls outputs after every status
    message: that listing need not walk the model folders)."""

    def root_of(tag: str) -> str | None:
        return "models" if tag.startswith(MODEL_TYPE) else tag if tag in LISTED else None

    required = {root_of(t) for t in all_} - {None}
    if required:
        return tuple(r for r in LISTED if r in required)
    if any_ and all(root_of(t) for t in any_):
        return tuple(r for r in LISTED if r in {root_of(t) for t in any_})
    return LISTED


def path_tags(root: str, rel: str) -> list[str]:
    """The tags an input or output file's place gives it."""
    parts = rel.split("/")
    extra = [parts[0]] if root == "input" and len(parts) == 2 and parts[0] in KNOWN_INPUT_SUBFOLDERS else []
    return [root, *extra]


class AssetIndex:
    def __init__(self, path: Path | None):
        """`path` None: an index in memory, gone with the server."""
        self._lock = threading.Lock()
        target = ":memory:" if path is None else str(path)
        self._db = sqlite3.connect(target, check_same_thread=False, isolation_level=None, timeout=10.0)
        if path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _rows(self, sql: str, args: tuple = ()) -> list[dict]:
        with self._lock:
            rows = self._db.execute(sql, args).fetchall()
        return [_record(r) for r in rows]

    def _exec(self, sql: str, args: tuple = ()) -> int:
        with self._lock:
            return self._db.execute(sql, args).rowcount

    # -- scanning ---------------------------------------------------------------------------------
    def sync(
        self,
        tenant: str,
        workspace: Any,
        roots: Iterable[str] = LISTED,
        reveal: bool = False,
        jobs: Callable[[], dict[tuple[str, str], str]] | None = None,
    ) -> dict:
        """Bring the tenant's records of `roots` in line with the files; `reveal` also brings back files
        whose records were deleted (an explicit seed). `jobs` maps (root, path in it) of the outputs of
        recent prompts to their prompt id, read only when there are new files. Counts of what changed."""
        roots = tuple(roots)
        files = scan(workspace, roots)
        now = time.time()
        marks = ",".join("?" * len(roots))
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                hidden = {
                    r[0] for r in self._db.execute("SELECT path FROM local_assets_hidden WHERE tenant = ?", (tenant,))
                }
                if reveal:  # the files of these roots come back; other roots' deleted records stay deleted
                    back = [(tenant, p) for p in hidden if p in files]
                    self._db.executemany("DELETE FROM local_assets_hidden WHERE tenant = ? AND path = ?", back)
                    hidden -= {p for _, p in back}
                known = self._db.execute(
                    f"SELECT id, root, path, size, mtime, missing, system_tags FROM local_assets "
                    f"WHERE tenant = ? AND root IN ({marks})",
                    (tenant, *roots),
                ).fetchall()
                seen: set[str] = set()
                marked = 0
                for asset_id, root, path, size, mtime, missing, system_tags in known:
                    seen.add(path)
                    facts = files.get(path)
                    if facts is None:
                        if root == "temp":  # previews are cleared with the temp folder: their records go too
                            self._db.execute("DELETE FROM local_assets WHERE id = ?", (asset_id,))
                        elif not missing:
                            marked += 1
                            self._db.execute("UPDATE local_assets SET missing = 1 WHERE id = ?", (asset_id,))
                        continue
                    changed = (facts.size, facts.mtime) != (size, mtime)
                    tags = json.dumps(facts.system_tags)
                    if changed or missing or tags != system_tags:  # most listings change nothing: no write
                        self._db.execute(
                            "UPDATE local_assets SET missing = 0, size = ?, mtime = ?, system_tags = ?, "
                            "hash = CASE WHEN ? THEN NULL ELSE hash END WHERE id = ?",
                            (facts.size, facts.mtime, tags, changed, asset_id),
                        )
                new = [(path, facts) for path, facts in files.items() if path not in seen and path not in hidden]
                job_of = jobs() if new and jobs is not None else {}
                for path, facts in new:
                    # A file found by a scan was made when it was written (several outputs of one run keep
                    # their order), never later than now.
                    made = min(facts.mtime, now)
                    self._insert(
                        new_record(
                            tenant,
                            path,
                            facts,
                            os.path.basename(path),
                            made,
                            job_id=job_of.get((facts.root, facts.loader_path)),
                        )
                    )
                created = len(new)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return {"scanned": len(files), "created": created, "marked_missing": marked}

    def _insert(self, record: dict) -> None:
        values = tuple(json.dumps(record[c]) if c in _JSON else record[c] for c in _COLUMNS)
        self._db.execute(
            f"INSERT INTO local_assets ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})", values
        )

    # -- records ----------------------------------------------------------------------------------
    def add(self, record: dict) -> None:
        """Insert a record made through the API. A record a scan made over the same file and nobody
        touched since (no hash, tags, metadata or preview) says nothing more: it goes (a listing that ran
        while an upload was being placed would otherwise leave the file listed twice)."""
        with self._lock:
            self._db.execute(
                "DELETE FROM local_assets_hidden WHERE tenant = ? AND path = ?", (record["tenant"], record["path"])
            )
            self._db.execute(
                "DELETE FROM local_assets WHERE tenant = ? AND path = ? AND hash IS NULL AND tags = '[]' "
                "AND user_metadata = '{}' AND preview_id IS NULL",
                (record["tenant"], record["path"]),
            )
            self._insert(record)

    def all(self, tenant: str, roots: Iterable[str] = LISTED) -> list[dict]:
        roots = tuple(roots)
        return self._rows(
            f"SELECT {', '.join(_COLUMNS)} FROM local_assets WHERE tenant = ? AND root IN "
            f"({','.join('?' * len(roots))})",
            (tenant, *roots),
        )

    def get(self, tenant: str, asset_id: str) -> dict | None:
        rows = self._rows(
            f"SELECT {', '.join(_COLUMNS)} FROM local_assets WHERE tenant = ? AND id = ?", (tenant, asset_id)
        )
        return rows[0] if rows else None

    def by_hash(self, tenant: str, hash_: str) -> dict | None:
        """The tenant's newest present record over these bytes."""
        rows = self._rows(
            f"SELECT {', '.join(_COLUMNS)} FROM local_assets WHERE tenant = ? AND hash = ? "
            "AND missing = 0 ORDER BY created DESC LIMIT 1",
            (tenant, hash_),
        )
        return rows[0] if rows else None

    def set_hash(self, asset_id: str, hash_: str) -> None:
        self._exec("UPDATE local_assets SET hash = ? WHERE id = ?", (hash_, asset_id))

    def update(self, asset_id: str, **fields: Any) -> None:
        """Set the given columns and the update time."""
        fields["updated"] = time.time()
        sets = ", ".join(f"{k} = ?" for k in fields)
        values = tuple(json.dumps(v) if k in _JSON else v for k, v in fields.items())
        self._exec(f"UPDATE local_assets SET {sets} WHERE id = ?", (*values, asset_id))

    def touch(self, asset_id: str) -> None:
        self._exec("UPDATE local_assets SET accessed = ? WHERE id = ?", (time.time(), asset_id))

    def delete(self, tenant: str, asset_id: str) -> bool:
        """Remove the record (never the file); a file left with no record stays out of list scans."""
        with self._lock:
            row = self._db.execute(
                "SELECT path FROM local_assets WHERE tenant = ? AND id = ?", (tenant, asset_id)
            ).fetchone()
            if row is None:
                return False
            self._db.execute("DELETE FROM local_assets WHERE id = ?", (asset_id,))
            self._db.execute(
                "UPDATE local_assets SET preview_id = NULL WHERE tenant = ? AND preview_id = ?", (tenant, asset_id)
            )
            left = self._db.execute(
                "SELECT COUNT(*) FROM local_assets WHERE tenant = ? AND path = ?", (tenant, row[0])
            ).fetchone()[0]
            if not left:
                self._db.execute("INSERT OR IGNORE INTO local_assets_hidden VALUES (?, ?)", (tenant, row[0]))
            return True


def new_record(tenant: str, path: str, facts: FileFacts, name: str, now: float, **extra: Any) -> dict:
    record = {
        "id": str(uuid.uuid4()),
        "tenant": tenant,
        "root": facts.root,
        "path": path,
        "name": name,
        "loader_path": facts.loader_path,
        "display_name": facts.display_name,
        "hash": None,
        "size": facts.size,
        "mtime": facts.mtime,
        "mime_type": mimetypes.guess_type(path)[0],
        "system_tags": facts.system_tags,
        "tags": [],
        "user_metadata": {},
        "preview_id": None,
        "job_id": None,
        "created": now,
        "updated": now,
        "accessed": now,
        "missing": 0,
    }
    record.update(extra)
    return record


def tags_of(record: dict) -> list[str]:
    """The tags a client sees: the file's place first, then its own, then `missing` when it is gone."""
    tags = list(record["system_tags"])
    tags += [t for t in record["tags"] if t not in tags]
    if record["missing"]:
        tags.append(MISSING)
    return tags


def _record(row: tuple) -> dict:
    record = dict(zip(_COLUMNS, row))
    for key in _JSON:
        record[key] = json.loads(record[key])
    return record
