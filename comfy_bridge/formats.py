"""Workflow (UI/LiteGraph) JSON -> API prompt, the conversion the frontend does before POST /prompt.

Widget values are positional, so they are matched to inputs in /object_info input order; the
frontend-only `control_after_generate` value after a seed and the upload button value after an upload
combo are skipped. Muted nodes (mode 2) are dropped, bypassed nodes (mode 4) become pass-through links,
Reroute nodes are followed, and PrimitiveNode values are written into the widgets they feed.
"""

from __future__ import annotations

from typing import Any

from nodes.dynamic_inputs import DYNAMIC_COMBO

MUTED, BYPASSED = 2, 4
VIRTUAL_TYPES = {"Reroute", "PrimitiveNode", "Note", "MarkdownNote"}
# Beside the plain types, the input types the web UI draws a widget for whose value a node reads (its widget
# registry): a colour picker, a curve editor, a crop box, Create Bounding Boxes' canvas editor. Each takes its place
# in a node's widgets_values, so one left out would shift every widget after it.
WIDGET_TYPES = {
    "INT",
    "FLOAT",
    "STRING",
    "BOOLEAN",
    "COMBO",
    "COLOR",
    "CURVE",
    "BOUNDING_BOX",
    "BOUNDING_BOXES",
}
CONTROL_VALUES = {"fixed", "increment", "decrement", "randomize"}
UPLOAD_KEYS = ("image_upload", "video_upload", "audio_upload", "file_upload")
# Widgets the web UI leaves out of a saved workflow's widgets_values but sends in the prompt, with the value it
# sends: Image Compare's slider (its widget is made with serialize false on the node, true in its options).
UNSAVED_WIDGETS = {"IMAGECOMPARE": ("", "")}


def is_ui_format(data: Any) -> bool:
    """A LiteGraph workflow has a `nodes` list and `links`; an API prompt maps ids to {class_type, inputs}."""
    return isinstance(data, dict) and isinstance(data.get("nodes"), list) and "links" in data


def _links(workflow: dict) -> dict[int, tuple[int, int, int, int, Any]]:
    """link id -> (origin node, origin slot, target node, target slot, type); arrays or objects."""
    out = {}
    for link in workflow.get("links") or []:
        if isinstance(link, dict):
            out[link["id"]] = (
                link["origin_id"],
                link["origin_slot"],
                link["target_id"],
                link["target_slot"],
                link.get("type"),
            )
        elif link:
            out[link[0]] = (link[1], link[2], link[3], link[4], link[5] if len(link) > 5 else None)
    return out


def _is_widget(spec: Any) -> bool:
    if not isinstance(spec, (list, tuple)) or not spec:
        return False
    kind, options = spec[0], (spec[1] if len(spec) > 1 and isinstance(spec[1], dict) else {})
    if options.get("forceInput") or options.get("rawLink"):
        return False
    return isinstance(kind, (list, tuple)) or kind in WIDGET_TYPES


def _widget_values(node: dict, info: dict) -> dict[str, Any]:
    """Input name -> widget value for one node: its saved widgets, then the unsaved ones the web UI sends."""
    unsaved = {
        name: {"__value__": list(UNSAVED_WIDGETS[spec[0]])}
        for category in ("required", "optional")
        for name, spec in info.get("input", {}).get(category, {}).items()
        if isinstance(spec, (list, tuple)) and spec and isinstance(spec[0], str) and spec[0] in UNSAVED_WIDGETS
    }
    return {**_saved_widget_values(node, info), **unsaved}


def _saved_widget_values(node: dict, info: dict) -> dict[str, Any]:
    """Input name -> saved widget value for one node, following object_info's input order."""
    values = node.get("widgets_values")
    if isinstance(values, dict):
        return dict(values)
    values = list(values or [])
    out: dict[str, Any] = {}
    pos = 0
    order = info.get("input_order") or {k: list(v) for k, v in info.get("input", {}).items()}
    for category in ("required", "optional"):
        for name in order.get(category, []):
            spec = info["input"].get(category, {}).get(name)
            if _is_dynamic_combo(spec) and pos < len(values):
                pos = _dynamic_combo_values(name, spec, values, pos, out)
                continue
            if not _is_widget(spec) or pos >= len(values):
                continue
            # the web UI sends a list-valued widget as {"__value__": [...]}: a bare list would read as a link
            out[name] = {"__value__": values[pos]} if isinstance(values[pos], list) else values[pos]
            pos += 1
            options = spec[1] if len(spec) > 1 and isinstance(spec[1], dict) else {}
            has_control = options.get("control_after_generate") or (spec[0] == "INT" and name in ("seed", "noise_seed"))
            if has_control and pos < len(values) and values[pos] in CONTROL_VALUES:
                pos += 1
            if (
                any(options.get(k) for k in UPLOAD_KEYS)
                and pos < len(values)
                and values[pos] in ("image", "video", "audio", "file")
            ):
                pos += 1
    return out


def _is_dynamic_combo(spec: Any) -> bool:
    return isinstance(spec, (list, tuple)) and len(spec) > 1 and spec[0] == DYNAMIC_COMBO


def _dynamic_combo_values(name: str, spec: tuple, values: list, pos: int, out: dict[str, Any]) -> int:
    """A dynamic combo's widgets: the chosen option, then its option's widgets (required, then optional) as
    the web UI lists them after it, sent as `name.input` (a nested combo's as `name.input.inner`, depth
    first). Returns the position past them."""
    choice = values[pos]
    out[name] = choice
    pos += 1
    option = next((o for o in spec[1].get("options", []) if o.get("key") == choice), {})
    for category in ("required", "optional"):
        for sub, sub_spec in option.get("inputs", {}).get(category, {}).items():
            if _is_dynamic_combo(sub_spec) and pos < len(values):
                # a combo inside an option (today's Save Video: format.codec.encoding): its widgets follow it
                pos = _dynamic_combo_values(f"{name}.{sub}", sub_spec, values, pos, out)
            elif _is_widget(sub_spec) and pos < len(values):
                out[f"{name}.{sub}"] = values[pos]
                pos += 1
    return pos


def ui_to_api(workflow: dict, registry: Any) -> dict:
    """The API prompt a frontend would queue for `workflow` (node ids become strings)."""
    nodes = {n["id"]: n for n in workflow.get("nodes", [])}
    links = _links(workflow)

    def resolve(link_id: int | None, want_type: Any = None, seen: frozenset = frozenset()) -> list | None:
        """Follow a link through Reroutes and bypassed nodes to a real output `[id, slot]`."""
        if link_id is None or link_id not in links:
            return None
        origin, slot, _, _, link_type = links[link_id]
        node = nodes.get(origin)
        if node is None or origin in seen:
            return None
        seen = seen | {origin}
        if node.get("type") == "Reroute":
            inputs = node.get("inputs") or []
            return resolve(inputs[0].get("link") if inputs else None, want_type or link_type, seen)
        if node.get("mode") == BYPASSED:
            want = want_type or link_type
            inputs = node.get("inputs") or []
            # The frontend prefers the input at the same slot when its type matches, then any matching one.
            candidates = ([inputs[slot]] if slot < len(inputs) else []) + inputs
            for inp in candidates:
                if inp.get("link") is not None and (want in (None, "*") or inp.get("type") in (want, "*")):
                    return resolve(inp["link"], want, seen)
            return None
        if node.get("mode") == MUTED:
            return None
        return [str(origin), slot]

    prompt: dict[str, dict] = {}
    for node_id, node in nodes.items():
        class_type = node.get("type")
        if class_type in VIRTUAL_TYPES or node.get("mode") in (MUTED, BYPASSED):
            continue
        cls = registry.get(class_type)
        info = registry.node_info(class_type) if cls is not None else {"input": {}, "input_order": {}}
        inputs: dict[str, Any] = _widget_values(node, info)
        for inp in node.get("inputs") or []:
            name = (inp.get("widget") or {}).get("name") or inp.get("name")
            link_id = inp.get("link")
            if link_id is None or link_id not in links:
                continue
            origin = nodes.get(links[link_id][0])
            if origin is not None and origin.get("type") == "PrimitiveNode":
                values = origin.get("widgets_values") or []
                if values:
                    inputs[name] = values[0]
                continue
            target = resolve(link_id)
            if target is not None:  # an unresolvable link (muted source) leaves the widget value, if any
                inputs[name] = target
        title = node.get("title") or (info.get("display_name") if cls is not None else None) or class_type
        prompt[str(node_id)] = {"inputs": inputs, "class_type": class_type, "_meta": {"title": title}}
    return prompt
