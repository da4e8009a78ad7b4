"""What the template-workflow scripts (scripts/*_workflow.py) share: each turns a web UI template into
workflows_json/NAME.ui.json (the template's own graph, tiny files substituted) and NAME.json (our UI converter's
API format), against the node registry of a workspace that holds the demo models."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


Substitutions = dict[str, list[tuple[int, Any]]]  # node type -> (widget index, value)s


def template_ui(template: str) -> dict:
    """The installed template TEMPLATE's UI graph, as saved (comfyui-workflow-templates-json)."""
    from scripts.templates_coverage import templates_dir

    return json.loads((templates_dir() / f"{template}.json").read_text())


def substituted(ui: dict, substitute: Substitutions) -> dict:
    """`ui` with the widget values of `substitute` set on every node of each type (bypassed ones too); an index
    one past a node's saved values appends the value (a widget the saved template predates)."""
    for node in ui["nodes"]:
        for index, value in substitute.get(node["type"], []):
            values = node["widgets_values"]
            if index > len(values):
                raise IndexError(
                    f"{node['type']} node {node['id']}: widget index {index}, but it saves {len(values)} values"
                )
            values[index : index + 1] = [value]
    return ui


def tiny_template_ui(template: str, substitute: Substitutions, flatten: Callable[[dict], dict] | None = None) -> dict:
    """The installed template's UI graph, flattened by `flatten` (one of the subgraph unpackers) when given, with
    the tiny substitutions."""
    ui = template_ui(template)
    return substituted(flatten(ui) if flatten is not None else ui, substitute)


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
