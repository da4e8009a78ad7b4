"""What the template-workflow scripts (scripts/*_workflow.py) share: each turns a web UI template into
workflows_json/NAME.ui.json (the template's own graph, tiny files substituted) and NAME.json (our UI converter's
API format), against the node registry of a workspace that holds the demo models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def workspace_registry(root: str | Path) -> Any:
    """The node registry of the workspace at `root` (its node packs and model folders)."""
    from comfy_bridge.registry import build_registry
    from nodes.workspace import Workspace

    return build_registry(Workspace(Path(root)))


def write_workflow(name: str, ui: dict, registry: Any) -> None:
    """workflows_json/NAME.ui.json and NAME.json for the UI-format workflow `ui`."""
    from comfy_bridge.formats import ui_to_api

    out = REPO / "workflows_json" / name
    out.with_suffix(".ui.json").write_text(json.dumps(ui, indent=2) + "\n")
    out.with_suffix(".json").write_text(json.dumps(ui_to_api(ui, registry), indent=2) + "\n")
