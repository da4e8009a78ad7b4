"""Assets of Comfy API v2: uploads content-addressed by blake3 into the tenant's input folder, models
(`models/<folder>/<name>.safetensors`) into the tenant's own model folder, records minted over bytes
the tenant already has, and `core/ASSET` references in a workflow resolved to the file names its
nodes load. Blocking (files, SQLite): routes call these in a thread, in the tenant's scope."""

from __future__ import annotations

import errno
import json
import os
import posixpath
import shutil
import struct
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from comfy_bridge.server.view import type_dir
from nodes.safe_paths import UnsafePath, check_relative
from nodes.workspace import FOLDER_ALIASES

from . import tenant_context as context
from .tenant_folders import TENANT_MODEL_FOLDERS
from .v2_service import MODEL_PREFIX, V2Service, file_hash

ASSET_TYPE = "core/ASSET"


OWNING_KINDS = ("upload", "model")  # records over files v2 placed: the last one takes the file
MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024  # safetensors' own limit on the JSON header


class BadPath(ValueError):
    """A file_path the server refuses (the message says why)."""


class Clobber(ValueError):
    """A model upload whose path holds a file with other bytes (never replaced)."""


def model_target(file_path: str) -> tuple[str, str] | None:
    """(model folder, file name) of a `models/<folder>/<name>.safetensors` upload; None for an input
    file. Only safetensors, only the model folders a tenant may bring files into, one level deep."""
    if not isinstance(file_path, str) or not file_path.startswith("models/"):
        return None
    try:
        check_relative(file_path)
    except UnsafePath:
        raise BadPath(f"file_path {file_path!r} is not a safe relative path") from None
    parts = file_path.split("/")
    if len(parts) != 3:
        raise BadPath("a model's file_path is models/<folder>/<name>.safetensors")
    folder, name = FOLDER_ALIASES.get(parts[1], parts[1]), parts[2]
    if folder not in TENANT_MODEL_FOLDERS:
        raise BadPath(f"{parts[1]!r} is not a model folder ({', '.join(TENANT_MODEL_FOLDERS)})")
    if name.startswith(".") or not name.lower().endswith(".safetensors") or name == ".safetensors":
        raise BadPath("models are uploaded as .safetensors files only")
    return folder, name


def safetensors_problem(path: Path) -> str | None:
    """What makes the file not a well-formed safetensors file (its JSON header is parsed, its tensors'
    offsets must tile the rest of the file exactly); None when it is one. Nothing is deserialized."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            return "the file is shorter than a safetensors header"
        (length,) = struct.unpack("<Q", head)
        if not 2 <= length <= MAX_SAFETENSORS_HEADER or 8 + length > size:
            return "the safetensors header length is out of range"
        try:
            header = json.loads(f.read(length).decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return "the safetensors header is not JSON"
    if not isinstance(header, dict):
        return "the safetensors header is not a JSON object"
    end = 0
    for key, entry in header.items():
        if key == "__metadata__":
            if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                return "__metadata__ must map strings to strings"
            continue
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("dtype"), str)
            and isinstance(entry.get("shape"), list)
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in entry["shape"])
        ):
            return f"tensor {key[:60]!r} has no dtype and shape"
        offsets = entry.get("data_offsets")
        if not (
            isinstance(offsets, list)
            and len(offsets) == 2
            and all(isinstance(o, int) for o in offsets)
            and 0 <= offsets[0] <= offsets[1]
        ):
            return f"tensor {key[:60]!r} has no valid data_offsets"
        end = max(end, offsets[1])
    if 8 + length + end != size:
        return "the tensors' data does not match the file's size"
    return None


def _link_no_clobber(tmp: Path, target: Path) -> bool:
    """Put `tmp`'s bytes at `target` atomically, never replacing a file; False when one is there.
    (A hard link fails where a file exists; across file systems the bytes are copied beside the
    target first, then linked.)"""
    try:
        os.link(tmp, target)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    fd, staged = tempfile.mkstemp(dir=target.parent, prefix=".v2-upload-")
    os.close(fd)
    try:
        shutil.copyfile(tmp, staged)
        os.link(staged, target)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(staged)


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


def place_upload(tmp: Path, folder: Path, name: str, hash_: str) -> tuple[str, bool]:
    """Move the uploaded bytes into `folder` under `name` without ever replacing a file: an existing
    file with the same bytes is reused, one with other bytes keeps its name and the upload becomes
    `stem (1).ext`, `stem (2).ext`, ... (ComfyUI's upload naming). (name, whether the file is new)."""
    stem, ext = os.path.splitext(name)
    for i in range(10_000):
        candidate = name if i == 0 else f"{stem} ({i}){ext}"
        target = folder / candidate
        if _link_no_clobber(tmp, target):
            return candidate, True
        if target.is_file() and file_hash(target) == hash_:
            return candidate, False
    raise BadPath(f"too many files named like {name!r}")


def store_upload(
    service: V2Service,
    tenant: str,
    tmp: Path,
    hash_: str,
    size: int,
    content_type: str,
    file_path: str,
    tags: list[str],
    expires: float | None,
) -> tuple[dict, bool]:
    """(the new asset record, whether its bytes are new to the tenant)."""
    store, now = service.store, time.time()
    existing = store.asset_by_hash(tenant, hash_, now)
    row = {
        "id": str(uuid.uuid4()),
        "tenant": tenant,
        "hash": hash_,
        "size": size,
        "content_type": content_type,
        "file_path": file_path,
        "created": now,
        "expires": expires,
        "job_id": None,
        "node_id": None,
        "kind": "upload",
        "folder": "input",
        "tags": tags,
    }
    if existing is not None and service.asset_path(existing) is not None:
        row.update(
            folder=existing["folder"],
            name=existing["name"],
            kind=existing["kind"] if existing["kind"] in OWNING_KINDS else "reference",
        )
        store.extend_asset(existing["id"], expires)
        store.add_asset(row)
        return row, False
    with context.scoped(tenant or None):
        folder = type_dir(service.workspace, "input")
    row["name"], placed = place_upload(tmp, folder, input_name(file_path), hash_)
    if not placed:  # a file of the tenant's with these bytes, not placed by v2: never deleted by it
        row["kind"] = "reference"
    store.add_asset(row)
    return row, True


def store_model(
    service: V2Service,
    tenant: str,
    tmp: Path,
    hash_: str,
    size: int,
    content_type: str,
    file_path: str,
    folder: str,
    name: str,
    tags: list[str],
    expires: float | None,
) -> tuple[dict, bool]:
    """Place a checked safetensors file in the tenant's `folder` (the same bytes already there are
    reused; other bytes there raise Clobber) and record it; (record, whether the file is new)."""
    target_dir = service.model_dir(tenant, folder)
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / name
    new = _link_no_clobber(tmp, target)
    if not new and not (target.is_file() and file_hash(target) == hash_):
        raise Clobber(f"{file_path} exists with other bytes; upload under another name")
    row = {
        "id": str(uuid.uuid4()),
        "tenant": tenant,
        "hash": hash_,
        "size": size,
        "content_type": content_type,
        "file_path": file_path,
        "created": time.time(),
        "expires": expires,
        "job_id": None,
        "node_id": None,
        "kind": "model",
        "folder": MODEL_PREFIX + folder,
        "name": name,
        "tags": tags,
    }
    service.store.add_asset(row)
    return row, new


def mint_from_hash(
    service: V2Service, tenant: str, hash_: str, file_path: str | None, tags: list[str], expires: float | None
) -> tuple[dict, bool] | None:
    """A record over bytes the tenant already has ((record, minted new)); None when it has none. A
    record of the same bytes under the same file_path is handed back as it is."""
    store, now = service.store, time.time()
    existing = store.asset_by_hash(tenant, hash_, now)
    if existing is None or service.asset_path(existing) is None:
        return None
    if existing["job_id"] is None and (file_path is None or file_path == existing["file_path"]):
        store.extend_asset(existing["id"], expires)
        return store.asset(tenant, existing["id"], now), False
    # A record over a file v2 placed shares it (the file goes with the last one); over an output or
    # another file of the tenant's, it only refers to it.
    kind = existing["kind"] if existing["kind"] in OWNING_KINDS else "reference"
    row = {
        **existing,
        "id": str(uuid.uuid4()),
        "file_path": file_path or existing["file_path"],
        "created": now,
        "expires": expires,
        "job_id": None,
        "node_id": None,
        "kind": kind,
        "tags": tags,
    }
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
            if asset["folder"] == "input" or asset["folder"].startswith(MODEL_PREFIX):
                return asset["name"]  # a model by its name in its folder, as loaders list it
            return f"{asset['name']} [{asset['folder']}]"
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [resolve(v) for v in value]
        return value

    return resolve(workflow), missing


def delete_asset(service: V2Service, tenant: str, asset_id: str) -> str:
    """ "deleted", "not_found", or "in_use" (a retained job's output stays with its job)."""
    asset = service.store.asset(tenant, asset_id, time.time())
    if asset is None:
        return "not_found"
    if asset["job_id"] is not None:
        return "in_use"
    service.store.delete_asset(asset_id)
    if asset["kind"] in OWNING_KINDS:
        service.remove_file_if_unused(asset)
    return "deleted"
