"""API-format workflows written as the web UI saves them (NAME.json -> NAME.ui.json in workflows_json/): one node per
API node, widget values in each class's input order (a dynamic combo's chosen option's values after it, a seed's
"fixed" after the seed), a link per connection. Each file is checked to convert back to its API file with our
converter (comfy_bridge.formats.ui_to_api) before it is written:

    python scripts/workflow_ui.py NAME [NAME ...]

The family scripts that write API workflows (minimax_h3_workflow.py, pixart_workflow.py, ...) use to_ui too."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DYNAMIC_COMBO = "COMFY_DYNAMICCOMBO_V3"


def _is_widget(options) -> bool:
    return isinstance(options[0], list) or options[0] in ("INT", "FLOAT", "STRING", "BOOLEAN", "COMBO")


def _option_values(name: str, options, inputs: dict) -> list:
    """A dynamic combo's chosen option's widget values (`name.sub`, nested ones depth first), as the web UI saves
    them after the combo's own value (today's SaveVideo: format, format.codec)."""
    if options[0] != DYNAMIC_COMBO:
        return []
    chosen = next((o for o in options[1]["options"] if o["key"] == inputs[name]), {"inputs": {}})
    values = []
    for group in ("required", "optional"):
        for sub, sub_options in chosen["inputs"].get(group, {}).items():
            key = f"{name}.{sub}"
            if key in inputs and not isinstance(inputs[key], list):
                values.append(inputs[key])
                values.extend(_option_values(key, sub_options, inputs))
    return values


def to_ui(api: dict, registry) -> dict:
    nodes, links = [], []
    ids = {key: int(key) for key in api}
    for key, node in api.items():
        spec = registry.node_info(node["class_type"])["input"]
        inputs, widgets = [], []
        for group in ("required", "optional"):
            for name, options in spec.get(group, {}).items():
                value = node["inputs"].get(name)
                if isinstance(value, list):
                    link_id = len(links) + 1
                    links.append([link_id, ids[value[0]], value[1], ids[key], len(inputs), options[0]])
                    inputs.append({"name": name, "type": options[0], "link": link_id})
                    if _is_widget(options):  # a widget fed by a link keeps its slot among the widget values
                        inputs[-1]["widget"] = {"name": name}
                        widgets.append(options[1].get("default") if len(options) > 1 else None)
                elif name in node["inputs"]:
                    widgets.append(value)
                    if len(options) > 1 and isinstance(options[1], dict) and options[1].get("control_after_generate"):
                        widgets.append("fixed")
                    widgets.extend(_option_values(name, options, node["inputs"]))
        for name, value in node["inputs"].items():  # dynamic inputs (an autogrow's "values.a") are links here
            if isinstance(value, list) and all(i["name"] != name for i in inputs):
                link_id = len(links) + 1
                links.append([link_id, ids[value[0]], value[1], ids[key], len(inputs), "*"])
                inputs.append({"name": name, "type": "*", "link": link_id})
        nodes.append(
            {
                "id": ids[key],
                "type": node["class_type"],
                "mode": 0,
                "inputs": inputs,
                "outputs": [],
                "widgets_values": widgets,
                "properties": {},
            }
        )
    for link in links:
        origin = next(n for n in nodes if n["id"] == link[1])
        while len(origin["outputs"]) <= link[2]:
            origin["outputs"].append({"name": "", "type": link[5], "links": []})
        origin["outputs"][link[2]]["links"].append(link[0])
    return {
        "last_node_id": max(ids.values()),
        "last_link_id": len(links),
        "nodes": nodes,
        "links": links,
        "version": 0.4,
    }


def core_registry():
    """The registry of the core nodes, as ui_to_api needs it."""
    from comfy_bridge import compat
    from comfy_bridge.registry import NodeRegistry

    compat.install()
    import nodes

    registry = NodeRegistry()
    registry.add_builtin(nodes.NODE_CLASS_MAPPINGS)
    return registry


def write_ui_files(names, registry=None) -> None:
    """workflows_json/NAME.ui.json for each NAME.json, refused where it would not convert back to the API file."""
    from comfy_bridge.formats import ui_to_api

    registry = registry or core_registry()
    for name in names:
        out = REPO / "workflows_json" / name
        api = json.loads(out.with_suffix(".json").read_text())
        ui = to_ui(api, registry)
        back = {k: {"class_type": v["class_type"], "inputs": v["inputs"]} for k, v in ui_to_api(ui, registry).items()}
        if back != {k: {"class_type": v["class_type"], "inputs": v["inputs"]} for k, v in api.items()}:
            raise SystemExit(f"{name}: the UI file does not convert back to the API file: {back}")
        out.with_suffix(".ui.json").write_text(json.dumps(ui, indent=2) + "\n")


if __name__ == "__main__":
    write_ui_files(sys.argv[1:])
