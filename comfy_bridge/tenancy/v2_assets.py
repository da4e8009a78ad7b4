"""Assets of Comfy API v2: uploads content-addressed by blake3 into the tenant's input folder, records
minted over bytes the tenant already has, and `core/ASSET` references in a workflow resolved to the
file names its nodes load. Blocking (files, SQLite): routes call these in a thread, in the tenant's
scope (its folders)."""
from __future__ import annotations

import os
import posixpath
import time
import uuid
from pathlib import Path
from typing import Any

from comfy_bridge.server.view import type_dir
from nodes.safe_paths import UnsafePath, check_relative

from . import tenant_context as context
from .v2_service import V2Service, file_hash

ASSET_TYPE = "core/ASSET"


class BadPath(ValueError):
    """A file_path the server refuses (the message says why)."""


def input_name(file_path: str) -> str:
    """The file name an uploaded input gets: the last segment of `file_path` (`photo.png`,
    `input/photo.png`), checked like every client-supplied name."""
    if not isinstance(file_path, str) or not file_path.strip():
        raise BadPath("file_path is required")
    try:
        check_relative(file_path)
    except UnsafePath:
        raise BadPath(f"file_path {file_path!r} is not a safe relative path") from None
    name = posixpath.basename(posixpath.normpath(file_path))
    if name in ("", ".", "..") or name.startswith("."):
        raise BadPath(f"file_path {file_path!r} names no file")
    return name


def _place(tmp: Path, folder: Path, name: str, hash_: str) -> str:
    """Move the uploaded bytes into `folder` under `name` without ever replacing a file: an existing
    file with the same bytes is reused, one with other bytes keeps its name and the upload becomes
    `stem (1).ext`, `stem (2).ext`, ... (ComfyUI's upload naming)."""
    stem, ext = os.path.splitext(name)
    for i in range(10_000):
        candidate = name if i == 0 else f"{stem} ({i}){ext}"
        target = folder / candidate
        try:
            os.link(tmp, target)   # atomic, and fails where a file exists: no clobbering
        except FileExistsError:
            if target.is_file() and file_hash(target) == hash_:
                return candidate
            continue
        return candidate
    raise BadPath(f"too many files named like {name!r}")


def store_upload(service: V2Service, tenant: str, tmp: Path, hash_: str, size: int, content_type: str,
                 file_path: str, tags: list[str], expires: float | None) -> tuple[dict, bool]:
    """(the new asset record, whether its bytes are new to the tenant)."""
    store, now = service.store, time.time()
    existing = store.asset_by_hash(tenant, hash_, now)
    row = {"id": str(uuid.uuid4()), "tenant": tenant, "hash": hash_, "size": size, "content_type": content_type,
           "file_path": file_path, "created": now, "expires": expires, "job_id": None, "node_id": None,
           "kind": "upload", "folder": "input", "tags": tags}
    if existing is not None and service.asset_path(existing) is not None:
        row.update(folder=existing["folder"], name=existing["name"])
        store.extend_asset(existing["id"], expires)
        store.add_asset(row)
        return row, False
    with context.scoped(tenant or None):
        folder = type_dir(service.workspace, "input")
    row["name"] = _place(tmp, folder, input_name(file_path), hash_)
    store.add_asset(row)
    return row, True


def mint_from_hash(service: V2Service, tenant: str, hash_: str, file_path: str | None, tags: list[str],
                   expires: float | None) -> tuple[dict, bool] | None:
    """A record over bytes the tenant already has ((record, minted new)); None when it has none. A
    record of the same bytes under the same file_path is handed back as it is."""
    store, now = service.store, time.time()
    existing = store.asset_by_hash(tenant, hash_, now)
    if existing is None or service.asset_path(existing) is None:
        return None
    if existing["job_id"] is None and (file_path is None or file_path == existing["file_path"]):
        store.extend_asset(existing["id"], expires)
        return store.asset(tenant, existing["id"], now), False
    row = {**existing, "id": str(uuid.uuid4()), "file_path": file_path or existing["file_path"], "created": now,
           "expires": expires, "job_id": None, "node_id": None, "kind": "upload", "tags": tags}
    store.add_asset(row)
    return row, True


def resolve_references(service: V2Service, tenant: str, workflow: dict) -> tuple[dict, list[str]]:
    """The workflow with every `core/ASSET` reference replaced by the name its node loads (an input
    file's name, an output as `name [output]`), and the ids that are malformed, unknown or not the
    tenant's. `info.id` is authoritative; hash and file_path are hints and never override it."""
    missing: list[str] = []
    now = time.time()

    def resolve(value: Any) -> Any:
        if isinstance(value, dict) and value.get("__type") == ASSET_TYPE:
            info = value.get("info")
            asset_id = info.get("id") if isinstance(info, dict) else None
            asset = service.store.asset(tenant, asset_id, now) if isinstance(asset_id, str) else None
            if asset is None or service.asset_path(asset) is None:
                missing.append(str(asset_id) if asset_id is not None else "<malformed core/ASSET reference>")
                return value
            return asset["name"] if asset["folder"] == "input" else f"{asset['name']} [{asset['folder']}]"
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [resolve(v) for v in value]
        return value

    return resolve(workflow), missing


def delete_asset(service: V2Service, tenant: str, asset_id: str) -> str:
    """"deleted", "not_found", or "in_use" (a retained job's output stays with its job)."""
    asset = service.store.asset(tenant, asset_id, time.time())
    if asset is None:
        return "not_found"
    if asset["job_id"] is not None:
        return "in_use"
    service.store.delete_asset(asset_id)
    service.remove_file_if_unused(asset)
    return "deleted"
