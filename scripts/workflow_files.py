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


def tiny_flat_template(template: str, widgets: dict[int, dict[int, Any]]) -> dict:
    """The installed template's UI graph with its subgraphs unpacked (templates_render.flat_workflow): our tiny file
    of the same family for each model file it names (templates_render.demo_file), the workspace's example picture,
    clip and sound for its input files, then `widgets` ({node id: {widget index: value}}) over its saved values."""
    from scripts.templates_render import AUDIO_FILE, IMAGE_FILE, MODEL_FILE, VIDEO_FILE, demo_file, flat_workflow

    examples = ((IMAGE_FILE, "example.png"), (VIDEO_FILE, "example.mp4"), (AUDIO_FILE, "example.wav"))
    flat = flat_workflow(template_ui(template))
    values = [v for n in flat["nodes"] for v in n.get("widgets_values") or [] if isinstance(v, str)]
    asked = [v for v in values if MODEL_FILE.search(v)]
    for node in flat["nodes"]:
        saved = node.get("widgets_values")
        if not isinstance(saved, list):
            continue
        for i, value in enumerate(saved):
            if not isinstance(value, str):
                continue
            if MODEL_FILE.search(value):
                saved[i] = demo_file(value, asked)
            else:
                saved[i] = next((example for kind, example in examples if kind.search(value)), value)
        for i, value in widgets.get(node["id"], {}).items():
            saved[i] = value
    return flat


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
