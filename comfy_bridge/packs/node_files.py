"""Files a pack node saved on an executor on another machine, carried to the same place in the head's folders.

A node that saves (a pack's own save node, a video writer) writes into the workspace of the machine it runs
on and names each file in its UI result (`{"filename", "subfolder", "type"}`), which clients then fetch from
the head (`/view`, history). On the head's host that is one folder; from another machine the executor reads
the files the result names and the head writes them at the same place in its own output, temp or input
folder. Names are checked on both sides: a result cannot make either machine read or write outside them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nodes.safe_paths import UnsafePath, safe_join
from nodes.workspace import Workspace

FileKey = tuple[str, str, str]  # (type, subfolder, filename)


def _folder(ws: Workspace, kind: str) -> Path | None:
    return {"output": ws.output_dir, "temp": ws.temp_dir, "input": ws.input_dir}.get(kind)


def named_files(result: Any) -> list[FileKey]:
    """The files a node's result names in its UI part (V1 dict or V3 NodeOutput)."""
    ui = result.get("ui") if isinstance(result, dict) else getattr(result, "ui", None)
    if ui is not None and not isinstance(ui, dict):
        ui = ui.as_dict()
    keys = []
    for items in (ui or {}).values():
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict) and isinstance(item.get("filename"), str):
                keys.append((str(item.get("type", "output")), str(item.get("subfolder", "")), item["filename"]))
    return keys


def _path(ws: Workspace, key: FileKey) -> Path | None:
    kind, subfolder, filename = key
    folder = _folder(ws, kind)
    if folder is None:
        return None
    try:
        return safe_join(folder, *filter(None, subfolder.split("/")), filename)
    except UnsafePath:
        return None


def read_named(result: Any, ws: Workspace) -> dict[FileKey, bytes]:
    """The bytes of each file the result names that exists in this machine's folders."""
    found = {}
    for key in named_files(result):
        path = _path(ws, key)
        if path is not None and path.is_file():
            found[key] = path.read_bytes()
    return found


def write_named(files: dict[FileKey, bytes], ws: Workspace) -> None:
    """Write the files at the same places in this (the head's) workspace."""
    for key, data in files.items():
        path = _path(ws, key)
        if path is None:
            raise UnsafePath("/".join(key))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
