"""What custom node folders offer the web UI besides nodes: example workflows and translations."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from nodes.workspace import Workspace

log = logging.getLogger(__name__)

EXAMPLE_FOLDERS = ("example_workflows", "example", "examples", "workflow", "workflows")
I18N_EXTRA_FILES = {"nodeDefs.json": "nodeDefs", "commands.json": "commands", "settings.json": "settings"}


def custom_node_packs(ws: Workspace) -> list[Path]:
    """Package folders under every custom_nodes directory, skipping disabled and hidden ones."""
    packs = []
    for base in ws.folder_paths("custom_nodes"):
        if base.is_dir():
            packs.extend(
                p
                for p in sorted(base.iterdir())
                if p.is_dir() and not p.name.endswith(".disabled") and not p.name.startswith((".", "__"))
            )
    return packs


def example_workflow_dirs(ws: Workspace) -> dict[str, Path]:
    """pack name -> its first example-workflow folder (ComfyUI's folder names, in its order)."""
    found = {}
    for pack in custom_node_packs(ws):
        for name in EXAMPLE_FOLDERS:
            if (pack / name).is_dir():
                found[pack.name] = pack / name
                break
    return found


def workflow_templates(ws: Workspace) -> dict[str, list[str]]:
    return {pack: sorted(p.stem for p in folder.glob("*.json")) for pack, folder in example_workflow_dirs(ws).items()}


def _merge(into: dict, new: dict) -> None:
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def translations(ws: Workspace) -> dict[str, dict]:
    """{lang: merged translations} from custom_nodes/*/locales/<lang>/{main,nodeDefs,commands,settings}.json."""
    out: dict[str, dict] = {}
    for pack in custom_node_packs(ws):
        locales = pack / "locales"
        if not locales.is_dir():
            continue
        for lang_dir in sorted(p for p in locales.iterdir() if p.is_dir()):
            merged: dict = {}
            try:
                main = lang_dir / "main.json"
                if main.is_file():
                    _merge(merged, json.loads(main.read_text(encoding="utf-8")))
                for file, key in I18N_EXTRA_FILES.items():
                    if (lang_dir / file).is_file():
                        _merge(merged, {key: json.loads((lang_dir / file).read_text(encoding="utf-8"))})
            except (OSError, json.JSONDecodeError) as exc:
                log.warning("skipping translations in %s: %s", lang_dir, exc)
                continue
            _merge(out.setdefault(lang_dir.name, {}), merged)
    return out
