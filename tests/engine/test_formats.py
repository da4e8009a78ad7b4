"""Workflow (UI) JSON -> API prompt."""

from __future__ import annotations

import copy

from comfy_bridge.formats import is_ui_format, ui_to_api


def workflow() -> dict:
    return {
        "last_node_id": 7,
        "last_link_id": 6,
        "version": 0.4,
        "nodes": [
            {
                "id": 1,
                "type": "Picker",
                "mode": 0,
                "inputs": [],
                "outputs": [{"name": "STRING", "type": "STRING", "links": [1]}],
                "widgets_values": ["green", 3, "randomize", 0.5, "name", True],
            },
            {
                "id": 2,
                "type": "Reroute",
                "mode": 0,
                "inputs": [{"name": "", "type": "*", "link": 1}],
                "outputs": [{"name": "", "type": "STRING", "links": [2]}],
            },
            {
                "id": 3,
                "type": "Output",
                "mode": 0,
                "title": "Shown",
                "inputs": [{"name": "value", "type": "*", "link": 2}],
                "widgets_values": [],
            },
            {
                "id": 4,
                "type": "Const",
                "mode": 0,
                "inputs": [{"name": "value", "type": "FLOAT", "link": 3, "widget": {"name": "value"}}],
                "outputs": [{"name": "FLOAT", "type": "FLOAT", "links": [4]}],
                "widgets_values": [0.0],
            },
            {
                "id": 5,
                "type": "PrimitiveNode",
                "mode": 0,
                "outputs": [{"name": "FLOAT", "type": "FLOAT", "links": [3]}],
                "widgets_values": [2.5, "fixed"],
            },
            {
                "id": 6,
                "type": "Double",
                "mode": 4,
                "inputs": [{"name": "value", "type": "FLOAT", "link": 4}],
                "outputs": [{"name": "FLOAT", "type": "FLOAT", "links": [5]}],
            },
            {"id": 7, "type": "Output", "mode": 0, "inputs": [{"name": "value", "type": "*", "link": 5}]},
            {"id": 8, "type": "Output", "mode": 2, "inputs": [{"name": "value", "type": "*", "link": 6}]},
            {"id": 9, "type": "Note", "mode": 0, "widgets_values": ["hello"]},
        ],
        "links": [
            [1, 1, 0, 2, 0, "STRING"],
            [2, 2, 0, 3, 0, "*"],
            [3, 5, 0, 4, 0, "FLOAT"],
            [4, 4, 0, 6, 0, "FLOAT"],
            [5, 6, 0, 7, 0, "FLOAT"],
            [6, 4, 0, 8, 0, "FLOAT"],
        ],
        "groups": [],
        "config": {},
        "extra": {},
    }


def test_detects_formats():
    assert is_ui_format(workflow())
    assert not is_ui_format({"1": {"class_type": "Const", "inputs": {"value": 1.0}}})


def test_converts_widgets_links_reroutes_primitives_bypass_and_mute(registry):
    prompt = ui_to_api(workflow(), registry)
    assert set(prompt) == {"1", "3", "4", "7"}
    assert prompt["1"]["inputs"] == {"choice": "green", "count": 3, "ratio": 0.5, "name": "name", "flag": True}
    assert prompt["3"] == {"inputs": {"value": ["1", 0]}, "class_type": "Output", "_meta": {"title": "Shown"}}
    assert prompt["4"]["inputs"] == {"value": 2.5}
    assert prompt["7"]["inputs"] == {"value": ["4", 0]}
    assert prompt["4"]["_meta"]["title"] == "Constant"


async def test_converted_workflow_runs(registry, run):
    executor = await run(ui_to_api(workflow(), registry))
    assert executor.history_result["outputs"]["7"] == {"values": [2.5]}
    assert executor.history_result["outputs"]["3"] == {"values": ["green3"]}


class _TextOverlayRegistry:
    """One class whose colour and curve widgets stand between others, as Text Overlay's colour does."""

    INFO = {
        "input": {
            "required": {
                "size": ("INT", {"default": 24}),
                "color": ("COLOR", {"default": "#ffffff"}),
                "curve": ("CURVE", {"default": {"points": [[0, 0], [1, 1]]}, "socketless": True}),
                "text": ("STRING", {"default": ""}),
            }
        },
        "input_order": {"required": ["size", "color", "curve", "text"]},
    }

    def get(self, class_type: str) -> object:
        return object

    def node_info(self, class_type: str) -> dict:
        return self.INFO


def test_colour_and_curve_widgets_keep_their_places():
    # the web UI draws a widget for COLOR and CURVE inputs and saves their values among the others
    curve = {"points": [[0, 0], [0.5, 0.7], [1, 1]], "interpolation": "linear"}
    ui = {
        "nodes": [
            {"id": 1, "type": "Overlay", "mode": 0, "inputs": [], "widgets_values": [32, "#0a9299", curve, "hi"]}
        ],
        "links": [],
    }
    inputs = ui_to_api(ui, _TextOverlayRegistry())["1"]["inputs"]
    assert inputs == {"size": 32, "color": "#0a9299", "curve": curve, "text": "hi"}


async def test_image_compare_takes_its_slider_value_and_a_saved_image(tmp_path):
    # The web UI keeps Image Compare's slider out of widgets_values (the templates save it as []) but sends it in
    # the prompt as {"__value__": ["", ""]}; without it validation drops the node (compare_view missing). Today's
    # Save Image passes its images on, and templates compare against them (0.3.64's had no output to link).
    from comfy_bridge.cli.run import run_prompt
    from comfy_bridge.registry import build_registry
    from comfy_bridge.validation import validate_prompt
    from nodes.workspace import Workspace, activate

    ws = activate(Workspace(tmp_path / "w").create())
    registry = build_registry(ws, load_custom_nodes=False)
    ui = {
        "nodes": [
            {"id": 1, "type": "EmptyImage", "mode": 0, "inputs": [], "widgets_values": [8, 8, 1, 0]},
            {
                "id": 2,
                "type": "SaveImage",
                "mode": 0,
                "inputs": [{"name": "images", "link": 1}],
                "widgets_values": ["s"],
            },
            {
                "id": 3,
                "type": "ImageCompare",
                "mode": 0,
                "inputs": [
                    {"name": "image_a", "shape": 7, "type": "IMAGE", "link": 2},
                    {"name": "image_b", "shape": 7, "type": "IMAGE", "link": 3},
                ],
                "widgets_values": [],
            },
        ],
        "links": [[1, 1, 0, 2, 0, "IMAGE"], [2, 1, 0, 3, 0, "IMAGE"], [3, 2, 0, 3, 1, "IMAGE"]],
    }
    prompt = ui_to_api(ui, registry)
    assert prompt["3"]["inputs"] == {"compare_view": {"__value__": ["", ""]}, "image_a": ["1", 0], "image_b": ["2", 0]}
    valid, error, outputs, node_errors = await validate_prompt(registry, "p", copy.deepcopy(prompt), None)
    assert (valid, error, node_errors) == (True, None, {})
    assert sorted(outputs) == ["2", "3"]
    await run_prompt(prompt, None, registry, show_progress=False, all_outputs=True)
    assert sorted(p.name[:15] for p in ws.temp_dir.iterdir()) == ["comfy.compare.a", "comfy.compare.b"]
    assert [p.name for p in ws.output_dir.iterdir()] == ["s_00001_.png"]


def test_widgets_missing_from_a_saved_workflow_are_left_out():
    # A template saved before a node gained widgets holds fewer values than it has widgets (a combo among them, whose
    # type in object_info is its option list): those are left out for validation's defaults, not a TypeError.
    from comfy_bridge.registry import build_registry

    ui = {"nodes": [{"id": 1, "type": "LatentUpscale", "mode": 0, "inputs": [], "widgets_values": []}], "links": []}
    assert ui_to_api(ui, build_registry(None, load_custom_nodes=False))["1"]["inputs"] == {}


class _NestedComboRegistry:
    """One class whose dynamic combo's option holds another dynamic combo (today's Save Video: format ->
    codec -> encoding -> crf), then an optional plain widget."""

    CRF = ("FLOAT", {"default": 23.0})
    ENCODING = (
        "COMFY_DYNAMICCOMBO_V3",
        {"options": [{"key": "auto", "inputs": {}}, {"key": "re-encode", "inputs": {"required": {"crf": CRF}}}]},
    )
    CODEC = (
        "COMFY_DYNAMICCOMBO_V3",
        {
            "options": [
                {"key": "auto", "inputs": {"required": {}}},
                {"key": "h264", "inputs": {"required": {}, "optional": {"encoding": ENCODING}}},
            ]
        },
    )
    INFO = {
        "input": {
            "required": {
                "format": (
                    "COMFY_DYNAMICCOMBO_V3",
                    {"options": [{"key": "mkv", "inputs": {"required": {"codec": CODEC}}}]},
                )
            },
            "optional": {"label": ("STRING", {"default": ""})},
        },
        "input_order": {"required": ["format"], "optional": ["label"]},
    }

    def get(self, class_type: str) -> object:
        return object

    def node_info(self, class_type: str) -> dict:
        return self.INFO


def test_nested_dynamic_combo_widgets_follow_their_combo_depth_first():
    def inputs(values: list) -> dict:
        ui = {"nodes": [{"id": 1, "type": "Save", "mode": 0, "inputs": [], "widgets_values": values}], "links": []}
        return ui_to_api(ui, _NestedComboRegistry())["1"]["inputs"]

    assert inputs(["mkv", "h264", "re-encode", 18, "x"]) == {
        "format": "mkv",
        "format.codec": "h264",
        "format.codec.encoding": "re-encode",
        "format.codec.encoding.crf": 18,
        "label": "x",
    }
    assert inputs(["mkv", "auto", "y"]) == {"format": "mkv", "format.codec": "auto", "label": "y"}
