"""Write workflows_json/stable_cascade.ui.json, the web UI's format of the Stable Cascade workflow
(workflows_json/stable_cascade.json: ComfyUI's stage C then stage B workflow on the tiny demo checkpoints), and check
that it converts back to the API file.

    python scripts/stable_cascade_workflow.py
"""

from __future__ import annotations

import json
from pathlib import Path

from scripts.workflow_ui import to_ui

REPO = Path(__file__).resolve().parents[1]
NAME = "stable_cascade"


def write_ui(name: str) -> None:
    """workflows_json/<name>.ui.json from workflows_json/<name>.json, checked to convert back."""
    from comfy_bridge import compat
    from comfy_bridge.formats import ui_to_api
    from comfy_bridge.registry import NodeRegistry

    compat.install()
    import nodes

    registry = NodeRegistry()
    registry.add_builtin(nodes.NODE_CLASS_MAPPINGS)
    out = REPO / "workflows_json" / name
    api = json.loads(out.with_suffix(".json").read_text())
    ui = to_ui(api, registry)
    back = {k: {"class_type": v["class_type"], "inputs": v["inputs"]} for k, v in ui_to_api(ui, registry).items()}
    if back != api:
        raise SystemExit(f"{name}: the UI file does not convert back to the API file: {back}")
    out.with_suffix(".ui.json").write_text(json.dumps(ui, indent=2) + "\n")


if __name__ == "__main__":
    write_ui(NAME)
