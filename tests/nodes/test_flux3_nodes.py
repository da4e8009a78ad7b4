"""FLUX 3 Image Layout Prompt (Flux3LayoutPrompt) as the FLUX 3 templates use it: its interface as the templates
(widget `prompt`, socket `element` of type ARRAY, output `prompt` STRING) and comfyui-embedded-docs 0.5.15 describe
it (ComfyUI's source of the class was not readable here), the prompt unchanged without elements, and with elements
the box table BFL's reference code gives FLUX 3 (diffusers 0.42's flux3 prompt_upsampler: caption, space, JSON rows
{id obj_N, bbox [y_min, x_min, y_max, x_max] on 0-1000, desc}). The templates' Create Bounding Boxes canvas
(a list-valued widget) converts from the UI format as the web UI sends it ({"__value__": [...]})."""

from __future__ import annotations

import json

import pytest

from comfy_bridge.formats import ui_to_api
from comfy_bridge.registry import build_registry
from nodes.library.bounding_boxes import CreateBoundingBoxes
from nodes.library.flux3 import Flux3LayoutPrompt


@pytest.fixture(scope="module")
def registry():
    return build_registry(None, load_custom_nodes=False)


def test_object_info_has_the_templates_interface(registry):
    info = json.loads(json.dumps(registry.node_info("Flux3LayoutPrompt")))
    required = info["input"]["required"]
    assert list(required) == ["prompt", "element"] and info["input"].get("optional") in (None, {})
    assert required["prompt"][0] == "STRING" and required["prompt"][1]["multiline"] is True
    assert required["element"][0] == "ARRAY"
    assert (info["output"], info["output_name"], info["display_name"]) == (
        ["STRING"],
        ["prompt"],
        "FLUX 3 Image Layout Prompt",
    )


def test_no_elements_leave_the_prompt_unchanged():
    prompt = "In <ref_image_0>, change the dress color <obj_1> to red"
    assert Flux3LayoutPrompt().execute(prompt, []) == (prompt,)


def test_create_bounding_boxes_elements_become_the_box_table():
    boxes = [
        {"x": 100, "y": 50, "width": 300, "height": 200, "metadata": {"type": "obj", "desc": "a red cup"}},
        {
            "x": 0,
            "y": 900,
            "width": 1000,
            "height": 100,
            "metadata": {"type": "text", "text": "OPEN", "desc": "neon sign", "palette": ["#ff0000"]},
        },
    ]
    (_, _, elements) = CreateBoundingBoxes().execute(1000, 1000, boxes)["result"]
    (out,) = Flux3LayoutPrompt().execute("  a cup <obj_1> under a sign <obj_2> ", elements)
    caption, table = out.split(" [", 1)
    assert caption == "a cup <obj_1> under a sign <obj_2>"
    assert json.loads("[" + table) == [
        {"id": "obj_1", "bbox": [50, 100, 250, 400], "desc": "a red cup"},
        {"id": "obj_2", "bbox": [900, 0, 1000, 1000], "desc": '"OPEN", neon sign'},
    ]


@pytest.mark.parametrize(
    "element,match",
    [("boxes", "expected the ARRAY"), ([{"desc": "no box"}], "item 0 has no bbox"), ([3], "item 0 is int")],
)
def test_bad_elements_are_refused_by_name(element, match):
    with pytest.raises(ValueError, match=f"element: .*{match}"):
        Flux3LayoutPrompt().execute("a prompt", element)


def test_canvas_widget_converts_as_the_web_ui_sends_it(registry):
    """The template's Create Bounding Boxes node saves [width, height, editor_state, last_incoming]; the two
    canvas lists must reach the API prompt as values, not be dropped or read as links."""
    box = {"x": 1, "y": 2, "width": 3, "height": 4, "metadata": {"type": "obj", "desc": "d"}}
    ui = {
        "nodes": [
            {
                "id": 25,
                "type": "CreateBoundingBoxes",
                "inputs": [{"name": "background", "type": "IMAGE", "link": None}],
                "outputs": [],
                "widgets_values": [512, 768, [box], []],
                "mode": 0,
            }
        ],
        "links": [],
    }
    assert ui_to_api(ui, registry)["25"]["inputs"] == {
        "width": 512,
        "height": 768,
        "editor_state": {"__value__": [box]},
        "last_incoming": {"__value__": []},
    }
