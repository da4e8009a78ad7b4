"""Record upstream ComfyUI 0.10.0's /object_info entries of the nodes whose sampler list grew after 0.3.64
(KSampler, KSamplerAdvanced, KSamplerSelect: exp_heun_2_x0 and exp_heun_2_x0_sde after heunpp2) into the
today's-classes fixture, so the interface test compares them with today's list rather than 0.3.64's.

Run inside ComfyUI 0.10.0's own environment (commit 79cdbc81 of hiddenswitch/ComfyUI; it imports ComfyUI's
modules, nothing of ComfyUI is copied here; recipe in ../shared/reference/running-real-comfyui.md):

    cd <ComfyUI 0.10.0 source> && PYTHONPATH=<torchvision shim>:. <venv>/bin/python \\
        /work/main/scripts/record_comfyui_sampler_lists.py /work/main/tests/nodes/fixtures/comfyui_today_object_info.json

The entries are built the way 0.10.0's server builds a plain (V1) node's entry (input, input_order, outputs,
output node flag, category, module); KSamplerSelect is a V3 node there and reports its own. Descriptions and
tooltips are left out (never compared).
"""

from __future__ import annotations

import importlib
import json
import sys

NOTE = (
    " KSampler, KSamplerAdvanced (nodes.py) and KSamplerSelect (nodes_custom_sampler) recorded from 0.10.0"
    " (scripts/record_comfyui_sampler_lists.py): today's sampler list, with exp_heun_2_x0 and exp_heun_2_x0_sde."
)


def _plain_entry(nodes, name: str) -> dict:
    cls = nodes.NODE_CLASS_MAPPINGS[name]
    inputs = cls.INPUT_TYPES()
    entry = {
        "input": inputs,
        "input_order": {section: list(specs) for section, specs in inputs.items()},
        "output": list(cls.RETURN_TYPES),
        "output_is_list": list(getattr(cls, "OUTPUT_IS_LIST", [False] * len(cls.RETURN_TYPES))),
        "output_name": list(getattr(cls, "RETURN_NAMES", cls.RETURN_TYPES)),
        "name": name,
        "display_name": nodes.NODE_DISPLAY_NAME_MAPPINGS.get(name, name),
        "python_module": "nodes",
        "category": getattr(cls, "CATEGORY", "sd"),
        "output_node": bool(getattr(cls, "OUTPUT_NODE", False)),
    }
    # flags the server writes only when set, then the search aliases it always writes
    entry.update({flag: True for flag in ("deprecated", "experimental") if getattr(cls, flag.upper(), False)})
    entry["search_aliases"] = list(getattr(cls, "SEARCH_ALIASES", []))
    return entry


def _without_tooltips(value):
    if isinstance(value, dict):
        return {k: _without_tooltips(v) for k, v in value.items() if k not in ("tooltip", "description")}
    if isinstance(value, (list, tuple)):
        return [_without_tooltips(v) for v in value]
    return value


def record() -> dict:
    sys.argv = [sys.argv[0], "--cpu"]
    import comfy.options

    comfy.options.enable_args_parsing()
    import nodes

    out = {name: _plain_entry(nodes, name) for name in ("KSampler", "KSamplerAdvanced")}
    select = importlib.import_module("comfy_extras.nodes_custom_sampler").KSamplerSelect.GET_NODE_INFO_V1()
    select["python_module"] = "comfy_extras.nodes_custom_sampler"
    out["KSamplerSelect"] = select
    return _without_tooltips(out)


if __name__ == "__main__":
    path = sys.argv[1]
    recorded = record()
    with open(path) as f:
        fixture = json.load(f)
    fixture["classes"].update(recorded)
    if NOTE.strip() not in fixture["source"]:
        fixture["source"] += NOTE
    with open(path, "w") as f:
        json.dump(fixture, f, indent=1)
