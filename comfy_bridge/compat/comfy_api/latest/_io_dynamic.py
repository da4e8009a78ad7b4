"""The V3 dynamic input types (`io.MatchType`, `io.Autogrow`, `io.DynamicCombo`, `io.DynamicSlot`).

A dynamic input stands for other inputs that exist only in a given prompt: the frontend names them with
dotted ids ("resize.width" for an option's input, "images.image0" for a grown input). Before a node is
validated or run, `get_finalized_class_inputs` expands its declared inputs against the prompt's keys, and
`build_nested_inputs` turns the flat dotted values into the nested dicts `execute` receives
(`resize={"resize": "scale", "width": 512}`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any, TypedDict

from comfy_bridge.compat.comfy_api.latest._io import (
    AnyType,
    ComfyTypeI,
    ComfyTypeIO,
    Input,
    Output,
    WidgetInput,
    _ComfyType,
    comfytype,
    create_input_dict_v1,
    prune_dict,
)


class DynamicInput(Input):
    """An input whose nested inputs depend on the prompt (registered with an expander below)."""


class DynamicOutput(Output):
    """Reserved by ComfyUI for outputs that depend on the prompt."""


class V3Data(TypedDict, total=False):
    hidden_inputs: dict
    dynamic_paths: dict  # flat input id -> dotted path of its place in the nested kwargs
    dynamic_paths_default_value: dict
    create_dynamic_tuple: bool  # check_lazy_status gets (value, flat id) pairs


EMPTY_DICT = "empty_dict"


def _joined(prefix: list[str] | None, name: str | None = None) -> str:
    parts = list(prefix or []) + ([name] if name is not None else [])
    return ".".join(parts)


@comfytype(io_type="COMFY_MATCHTYPE_V3")
class MatchType(ComfyTypeIO):
    """Inputs and outputs sharing a template take one type, chosen in the frontend from the allowed ones."""

    class Template:
        def __init__(self, template_id: str, allowed_types: Any = AnyType):
            allowed = list(allowed_types) if isinstance(allowed_types, Iterable) else [allowed_types]
            for t in allowed:
                ok = issubclass(t, _ComfyType) if isinstance(t, type) else isinstance(t, _ComfyType)
                if not ok:
                    name = t.__name__ if isinstance(t, type) else type(t).__name__
                    raise ValueError(f"Allowed types must be a ComfyType or a list of ComfyTypes, got {name}")
            self.template_id, self.allowed_types = template_id, allowed

        def as_dict(self) -> dict:
            return {"template_id": self.template_id, "allowed_types": ",".join(t.io_type for t in self.allowed_types)}

    class Input(Input):
        def __init__(
            self,
            id: str,
            template: MatchType.Template,
            display_name: str | None = None,
            optional: bool = False,
            tooltip: str | None = None,
            lazy: bool | None = None,
            extra_dict: dict | None = None,
            raw_link: bool | None = None,
            advanced: bool | None = None,
        ):
            super().__init__(id, display_name, optional, tooltip, lazy, extra_dict, raw_link, advanced)
            self.template = template

        def as_dict(self) -> dict:
            return super().as_dict() | {"template": self.template.as_dict()}

    class Output(Output):
        def __init__(
            self,
            template: MatchType.Template,
            id: str | None = None,
            display_name: str | None = None,
            tooltip: str | None = None,
            is_output_list: bool = False,
        ):
            super().__init__(id, display_name if (id or display_name) else "MATCHTYPE", tooltip, is_output_list)
            self.template = template

        def as_dict(self) -> dict:
            return super().as_dict() | {"template": self.template.as_dict()}


@comfytype(io_type="COMFY_AUTOGROW_V3")
class Autogrow(ComfyTypeI):
    """A socket that adds another copy of its template input each time the last one is connected."""

    Type = dict
    _MaxNames = 100

    class _Template:
        def __init__(self, input: Input):
            if isinstance(input, DynamicInput):
                raise ValueError("Autogrow templates cannot be dynamic inputs")
            self.input = copy.copy(input)
            if isinstance(self.input, WidgetInput):
                self.input.force_input = True  # grown inputs are sockets
            self.names: list[str] = []

        def get_all(self) -> list[Input]:
            grown = []
            for name in self.names:
                one = copy.copy(self.input)
                one.id = name
                grown.append(one)
            return grown

        def as_dict(self) -> dict:
            return {"input": create_input_dict_v1([self.input])}

        def validate(self) -> None:
            self.input.validate()

    class TemplatePrefix(_Template):
        """Inputs named prefix0, prefix1, ... up to `max`; the first `min` are required."""

        def __init__(self, input: Input, prefix: str, min: int = 1, max: int = 10):
            super().__init__(input)
            if min < 0 or max < 1 or max > Autogrow._MaxNames:
                raise ValueError(
                    f"Autogrow.TemplatePrefix needs 0 <= min and 1 <= max <= {Autogrow._MaxNames}, "
                    f"got min={min}, max={max}"
                )
            self.prefix, self.min, self.max = prefix, min, max
            self.names = [f"{prefix}{i}" for i in range(max)]

        def as_dict(self) -> dict:
            return super().as_dict() | {"prefix": self.prefix, "min": self.min, "max": self.max}

    class TemplateNames(_Template):
        """Inputs with the given names, in order; the first `min` are required."""

        def __init__(self, input: Input, names: list[str], min: int = 1):
            super().__init__(input)
            if min < 0:
                raise ValueError(f"Autogrow.TemplateNames needs min >= 0, got {min}")
            self.names, self.min = list(names)[: Autogrow._MaxNames], min

        def as_dict(self) -> dict:
            return super().as_dict() | {"names": self.names, "min": self.min}

    class Input(DynamicInput):
        def __init__(
            self,
            id: str,
            template: Autogrow.TemplatePrefix | Autogrow.TemplateNames,
            display_name: str | None = None,
            optional: bool = False,
            tooltip: str | None = None,
            lazy: bool | None = None,
            extra_dict: dict | None = None,
        ):
            super().__init__(id, display_name, optional, tooltip, lazy, extra_dict)
            self.template = template

        def as_dict(self) -> dict:
            return super().as_dict() | {"template": self.template.as_dict()}

        def get_all(self) -> list[Input]:
            return [self] + self.template.get_all()

        def validate(self) -> None:
            self.template.validate()


@comfytype(io_type="COMFY_DYNAMICCOMBO_V3")
class DynamicCombo(ComfyTypeI):
    """A combo whose chosen option brings its own inputs."""

    Type = dict

    class Option:
        def __init__(self, key: str, inputs: list[Input]):
            self.key, self.inputs = key, inputs

        def as_dict(self) -> dict:
            return {"key": self.key, "inputs": create_input_dict_v1(self.inputs)}

    class Input(DynamicInput):
        def __init__(
            self,
            id: str,
            options: list[DynamicCombo.Option],
            display_name: str | None = None,
            optional: bool = False,
            tooltip: str | None = None,
            lazy: bool | None = None,
            extra_dict: dict | None = None,
        ):
            super().__init__(id, display_name, optional, tooltip, lazy, extra_dict)
            self.options = options

        def get_all(self) -> list[Input]:
            return [self] + [i for option in self.options for i in option.inputs]

        def as_dict(self) -> dict:
            return super().as_dict() | {"options": [o.as_dict() for o in self.options]}

        def validate(self) -> None:
            for option in self.options:
                for i in option.inputs:
                    i.validate()


@comfytype(io_type="COMFY_DYNAMICSLOT_V3")
class DynamicSlot(ComfyTypeI):
    """An optional socket that, once connected, brings more inputs."""

    Type = dict

    class Input(DynamicInput):
        def __init__(
            self,
            slot: Input,
            inputs: list[Input],
            display_name: str | None = None,
            tooltip: str | None = None,
            lazy: bool | None = None,
            extra_dict: dict | None = None,
        ):
            if isinstance(slot, DynamicInput):
                raise ValueError("DynamicSlot's slot cannot be a dynamic input")
            self.slot = copy.copy(slot)
            self.slot.display_name = slot.display_name if slot.display_name is not None else display_name
            self.slot.tooltip = slot.tooltip if slot.tooltip is not None else tooltip
            self.slot.lazy = slot.lazy if slot.lazy is not None else lazy
            self.slot.extra_dict = slot.extra_dict if slot.extra_dict is not None else (extra_dict or {})
            super().__init__(
                slot.id, self.slot.display_name, True, self.slot.tooltip, self.slot.lazy, self.slot.extra_dict
            )
            self.inputs = inputs
            self.force_input = None
            if isinstance(self.slot, WidgetInput):
                self.force_input = self.slot.force_input = True

        def get_all(self) -> list[Input]:
            return [self.slot] + self.inputs

        def as_dict(self) -> dict:
            return super().as_dict() | prune_dict(
                {
                    "slotType": str(self.slot.get_io_type()),
                    "inputs": create_input_dict_v1(self.inputs),
                    "forceInput": self.force_input,
                }
            )

        def validate(self) -> None:
            self.slot.validate()
            for i in self.inputs:
                i.validate()


# ---- expansion against a prompt's inputs ---------------------------------------------------------------

Expander = Callable[[dict, dict, tuple, str, list], None]


def _expand_autogrow(out: dict, live: dict, spec: tuple, category: str, prefix: list) -> None:
    template = spec[1]["template"]
    if "names" in template:
        names, minimum = template["names"], template["min"]
    else:
        names, minimum = [f"{template['prefix']}{i}" for i in range(template["max"])], template["min"]
    section, entries = next(((k, v) for k, v in template["input"].items() if v), (None, None))
    if entries is None:
        raise ValueError(f"Autogrow input {_joined(prefix)!r} has an empty template")
    grown_spec = next(iter(entries.values()))
    present: dict = {}
    for i, name in enumerate(names):
        key = _joined(prefix, name)
        place = "required" if i < minimum and section == "required" else "optional"
        out[place][key] = grown_spec  # listed even when absent, so a missing required one is reported
        if key in live:
            present.setdefault(place, {})[name] = grown_spec
    if not present:
        root = _joined(prefix)
        out["dynamic_paths"][root] = root
        out["dynamic_paths_default_value"][root] = EMPTY_DICT
    _parse(out, live, present, prefix)


def _expand_with_children(children: Callable[[dict, Any], Any]) -> Expander:
    """Expander for types whose own value selects nested inputs (a combo's option, a connected slot)."""

    def expand(out: dict, live: dict, spec: tuple, category: str, prefix: list) -> None:
        key = _joined(prefix)
        if key not in live:
            return
        nested = children(spec[1], live[key])
        if nested is None:
            return
        _parse(out, live, nested, prefix)
        out[category][key] = spec
        out["dynamic_paths"][key] = _joined(prefix, prefix[-1])

    return expand


def _combo_option_inputs(options: dict, chosen: Any) -> dict | None:
    return next((o["inputs"] for o in options["options"] if o["key"] == chosen), None)


EXPANDERS: dict[str, Expander] = {
    Autogrow.io_type: _expand_autogrow,
    DynamicCombo.io_type: _expand_with_children(_combo_option_inputs),
    DynamicSlot.io_type: _expand_with_children(lambda options, _value: options["inputs"]),
}


def _parse(out: dict, live: dict, declared: dict, prefix: list | None = None) -> None:
    for category, entries in declared.items():
        for name, spec in entries.items():
            io_type = spec[0]
            expander = EXPANDERS.get(io_type) if isinstance(io_type, str) else None
            if expander is not None:
                expander(out, live, spec, category, [*(prefix or []), name])
                continue
            key = _joined(prefix, name)
            out.setdefault(category, {})[key] = spec
            if prefix:
                out["dynamic_paths"][key] = key


def get_finalized_class_inputs(
    declared: dict, live_inputs: dict, include_hidden: bool = False
) -> tuple[dict, dict | None, V3Data]:
    """(inputs as this prompt node has them, the hidden section, the V3Data paths to nest values with)."""
    out: dict = {"required": {}, "optional": {}, "dynamic_paths": {}, "dynamic_paths_default_value": {}}
    declared = dict(declared)
    hidden = declared.pop("hidden", None)
    _parse(out, live_inputs, declared)
    v3_data: V3Data = {}
    for name in ("dynamic_paths", "dynamic_paths_default_value"):
        value = out.pop(name)
        if value:
            v3_data[name] = value
    if hidden is not None and include_hidden:
        out["hidden"] = hidden
    return out, hidden, v3_data


def build_nested_inputs(values: dict, v3_data: V3Data | dict | None) -> dict:
    """Flat dotted keyword values -> the nested dicts a V3 `execute` takes for its dynamic inputs."""
    paths = (v3_data or {}).get("dynamic_paths")
    if not paths:
        return values
    defaults = v3_data.get("dynamic_paths_default_value", {})
    as_tuple = v3_data.get("create_dynamic_tuple", False)
    values = dict(values)
    nested: dict = {}
    for key, path in paths.items():
        *parents, last = path.split(".")
        place = nested
        for part in parents:
            place = place.setdefault(part, {})
        value = values.pop(key, None)
        if value is None and defaults.get(key) == EMPTY_DICT:
            value = {}
        place[last] = (value, key) if as_tuple else value
    values.update(nested)
    return values


__all__ = [
    "DynamicInput",
    "DynamicOutput",
    "V3Data",
    "MatchType",
    "Autogrow",
    "DynamicCombo",
    "DynamicSlot",
    "get_finalized_class_inputs",
    "build_nested_inputs",
    "EXPANDERS",
]
