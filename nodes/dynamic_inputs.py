"""Today's ComfyUI dynamic inputs (V3 `Autogrow`, `DynamicCombo`, `MatchType`) for nodes written as plain
classes: how `/object_info` declares them, and how their values reach the node.

The web UI sends a dynamic input's parts as dotted names: an autogrow group `values` as `values.a`,
`values.b`; a dynamic combo `resize_type` as `resize_type` (the chosen option) plus `resize_type.width`.
The engine passes a node only the inputs its INPUT_TYPES answers for, so a node's input section is a
`DynamicSection`: its items are what `/object_info` shows, and it also answers for those dotted names with
the spec of the input they stand for (validation then checks them as ComfyUI does)."""

from __future__ import annotations

import re
from typing import Any

AUTOGROW = "COMFY_AUTOGROW_V3"
DYNAMIC_COMBO = "COMFY_DYNAMICCOMBO_V3"
MATCH_TYPE = "COMFY_MATCHTYPE_V3"
ANY = "*"


def match_type(template_id: str, allowed: str = ANY, **options: Any) -> tuple:
    """An input whose type the web UI resolves from what is linked to the inputs sharing `template_id`."""
    return (MATCH_TYPE, {**options, "template": {"template_id": template_id, "allowed_types": allowed}})


def _template_input(name: str, spec: tuple, optional: bool) -> dict:
    # ComfyUI lists an empty required section beside an optional item
    return {"required": {}, "optional": {name: spec}} if optional else {"required": {name: spec}}


def autogrow_prefix(
    input_name: str, spec: tuple, prefix: str, minimum: int, maximum: int, optional_items: bool = False
) -> tuple:
    """A group of `prefix0`, `prefix1`, ... inputs (at least `minimum` shown) that grows as the user links them."""
    return (
        AUTOGROW,
        {
            "template": {
                "input": _template_input(input_name, spec, optional_items),
                "prefix": prefix,
                "min": minimum,
                "max": maximum,
            }
        },
    )


def autogrow_names(input_name: str, spec: tuple, names: list[str], minimum: int, optional_items: bool = False) -> tuple:
    """A group whose inputs take the given names in order (`a`, `b`, ...)."""
    return (
        AUTOGROW,
        {"template": {"input": _template_input(input_name, spec, optional_items), "names": names, "min": minimum}},
    )


def dynamic_combo(options: dict[str, dict[str, tuple]], **extra: Any) -> tuple:
    """A combo whose chosen option brings its own inputs ({option: {input name: spec}})."""
    return (
        DYNAMIC_COMBO,
        {**extra, "options": [{"key": key, "inputs": {"required": dict(inputs)}} for key, inputs in options.items()]},
    )


def _item_names(spec: tuple) -> list[str]:
    template = spec[1]["template"]
    if "names" in template:
        return list(template["names"])
    return [f"{template['prefix']}{i}" for i in range(template["max"])]


def _item_spec(spec: tuple) -> tuple:
    inputs = spec[1]["template"]["input"]
    section = inputs.get("required") or inputs.get("optional")
    return next(iter(section.values()))


def sub_input(spec: tuple, part: str) -> tuple | None:
    """The spec of `part` of a dynamic input (an autogrow item name, or an input of a combo option)."""
    if spec[0] == AUTOGROW:
        return _item_spec(spec) if part in _item_names(spec) else None
    if spec[0] == DYNAMIC_COMBO:
        head, _, rest = part.partition(".")
        for option in spec[1]["options"]:  # an option's inputs may be required or optional (ComfyUI's V3)
            inputs = option["inputs"]
            inner = inputs.get("required", {}).get(head) or inputs.get("optional", {}).get(head)
            if inner is not None:
                return inner if not rest else sub_input(inner, rest)
    return None


class DynamicSection(dict):
    """An INPUT_TYPES section that also answers for the dotted parts of its dynamic inputs, and, with
    `accept_all`, for any name at all (a node that takes every input the web UI sends)."""

    def __init__(self, inputs: dict[str, tuple], accept_all: bool = False, private: dict[str, tuple] | None = None):
        """`private`: inputs a node sets only in the graphs it expands into, not shown in /object_info
        (a name ending in "." stands for every name it begins)."""
        super().__init__(inputs)
        self.accept_all = accept_all
        self.private = private or {}

    def _resolve(self, name: Any) -> tuple | None:
        if not isinstance(name, str):
            return None
        head, dot, rest = name.partition(".")
        if dot and dict.__contains__(self, head):
            return sub_input(dict.__getitem__(self, head), rest)
        if name in self.private or (dot and head + "." in self.private):
            return self.private.get(name) or self.private[head + "."]
        return (ANY, {}) if self.accept_all else None

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or self._resolve(name) is not None

    def __getitem__(self, name: str) -> tuple:
        if dict.__contains__(self, name):
            return dict.__getitem__(self, name)
        spec = self._resolve(name)
        if spec is None:
            raise KeyError(name)
        return spec

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self else default


def group(kwargs: dict[str, Any], name: str, spec: tuple) -> dict[str, Any]:
    """The values sent for the autogrow group `name`, by item name in the group's order."""
    values = {key.partition(".")[2]: value for key, value in kwargs.items() if key.startswith(name + ".")}
    order = {item: i for i, item in enumerate(_item_names(spec))}
    return {item: values[item] for item in sorted(values, key=lambda k: order.get(k, len(order)))}


def combo_inputs(kwargs: dict[str, Any], name: str) -> dict[str, Any]:
    """The inputs of the chosen option of the dynamic combo `name` ({input name: value})."""
    prefix = re.escape(name) + r"\."
    return {re.sub("^" + prefix, "", key): value for key, value in kwargs.items() if re.match(prefix, key)}
