"""API-format prompt -> UI-format (litegraph) workflow, laid out left to right by graph depth.

The inverse of `formats.ui_to_api`: used to ship every example workflow in both formats and to test
the UI->API conversion on real graphs. Widget values follow /object_info's input order, with the
`control_after_generate` pseudo-widget after each seed, as the web UI saves them.
"""
from __future__ import annotations

from typing import Any

WIDGET_TYPES = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}


def _is_widget(spec: list) -> bool:
    kind = spec[0]
    return isinstance(kind, list) or kind in WIDGET_TYPES


def _depths(prompt: dict[str, Any]) -> dict[str, int]:
    depth: dict[str, int] = {}

    def visit(nid: str, seen: tuple = ()) -> int:
        if nid in depth:
            return depth[nid]
        links = [v[0] for v in prompt[nid]["inputs"].values() if isinstance(v, list) and len(v) == 2
                 and str(v[0]) in prompt and str(v[0]) not in seen]
        depth[nid] = 1 + max((visit(str(s), seen + (nid,)) for s in links), default=-1)
        return depth[nid]

    for nid in prompt:
        visit(nid)
    return depth


def api_to_ui(prompt: dict[str, Any], registry) -> dict[str, Any]:
    depth = _depths(prompt)
    rows: dict[int, int] = {}
    nodes, links = [], []
    outputs: dict[tuple[str, int], list[int]] = {}
    for nid in sorted(prompt, key=lambda n: (depth[n], int(n) if n.isdigit() else n)):
        node = prompt[nid]
        info = registry.node_info(node["class_type"])
        values = node["inputs"]
        inputs, widgets = [], []
        for category in ("required", "optional"):
            for name, spec in info["input"].get(category, {}).items():
                value = values.get(name)
                linked = isinstance(value, list) and len(value) == 2 and str(value[0]) in prompt
                if _is_widget(spec):
                    if name not in values:
                        continue
                    widgets.append(None if linked else value)
                    if len(spec) > 1 and isinstance(spec[1], dict) and spec[1].get("control_after_generate"):
                        widgets.append("fixed")
                    if not linked:
                        continue
                if name not in values and category == "optional":
                    continue
                link_id = None
                if linked:
                    link_id = len(links) + 1
                    src, slot = str(value[0]), int(value[1])
                    src_type = registry.node_info(prompt[src]["class_type"])["output"][slot]
                    links.append([link_id, int(src), slot, int(nid), len(inputs), src_type])
                    outputs.setdefault((src, slot), []).append(link_id)
                entry = {"name": name, "type": spec[0] if isinstance(spec[0], str) else "COMBO", "link": link_id}
                if _is_widget(spec):
                    entry["widget"] = {"name": name}
                inputs.append(entry)
        col = depth[nid]
        row = rows.get(col, 0)
        rows[col] = row + 1
        nodes.append({"id": int(nid), "type": node["class_type"], "pos": [40 + 360 * col, 40 + 260 * row],
                      "size": [320, 200], "flags": {}, "order": len(nodes), "mode": 0, "inputs": inputs,
                      "outputs": [], "properties": {"Node name for S&R": node["class_type"]},
                      "widgets_values": widgets,
                      "_info": info})
    for n in nodes:
        info = n.pop("_info")
        n["outputs"] = [{"name": name, "type": kind, "links": outputs.get((str(n["id"]), slot), []),
                         "slot_index": slot}
                        for slot, (kind, name) in enumerate(zip(info["output"], info["output_name"]))]
    return {"last_node_id": max((n["id"] for n in nodes), default=0), "last_link_id": len(links),
            "nodes": nodes, "links": links, "groups": [], "config": {}, "extra": {}, "version": 0.4}
