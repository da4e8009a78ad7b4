"""MOSS-Image Layout Prompt (MOSSImageLayoutPrompt) as the MOSS-Image bbox templates use it: its interface as the
templates and comfyui-embedded-docs 0.5.15 give it (ComfyUI's source of the class was not readable here), the
prompt unchanged without elements, and with elements MOSS-Image's JSON layout (summary caption, items labelled
text / character / object with yxyx pixel boxes about the canvas centre, bbox_format and bbox_coord_space), the
form moss-image-mlx 0.2.0's layout checker reads. The template's own graph converts and its layout node runs."""

from __future__ import annotations

import json

import pytest

from comfy_bridge.registry import build_registry
from nodes.library.bounding_boxes import CreateBoundingBoxes
from nodes.library.moss_image import MOSSImageLayoutPrompt
from scripts import templates_coverage


@pytest.fixture(scope="module")
def registry():
    return build_registry(None, load_custom_nodes=False)


def test_object_info_has_the_templates_interface(registry):
    info = json.loads(json.dumps(registry.node_info("MOSSImageLayoutPrompt")))
    required = info["input"]["required"]
    assert list(required) == ["prompt", "element", "width", "height", "character_boxes"]
    assert info["input"].get("optional") in (None, {})
    assert required["prompt"][0] == "STRING" and required["prompt"][1]["multiline"] is True
    assert required["element"][0] == "ARRAY"
    for side in ("width", "height"):
        assert required[side][0] == "INT"
        assert {k: required[side][1][k] for k in ("default", "min", "max", "step")} == {
            "default": 1024,
            "min": 16,
            "max": 16384,
            "step": 16,
        }
    assert required["character_boxes"][0] == "STRING" and required["character_boxes"][1]["default"] == ""
    assert (info["output"], info["output_name"], info["display_name"]) == (
        ["STRING"],
        ["prompt"],
        "MOSS-Image Layout Prompt",
    )


def test_no_elements_leave_the_prompt_unchanged():
    prompt = "  A poster of a knight. "
    assert MOSSImageLayoutPrompt().execute(prompt, [], 1024, 1024, "1") == (prompt,)


def test_elements_become_the_layout_in_centred_pixels():
    boxes = [
        {"x": 0, "y": 0, "width": 512, "height": 256, "metadata": {"type": "text", "text": "MOSS", "desc": "title"}},
        {"x": 256, "y": 256, "width": 512, "height": 768, "metadata": {"type": "obj", "desc": "a knight"}},
        {
            "x": 768,
            "y": 768,
            "width": 256,
            "height": 256,
            "metadata": {"type": "obj", "desc": "a rose", "palette": ["#ff0000"]},
        },
    ]
    (_, _, elements) = CreateBoundingBoxes().execute(1024, 1024, boxes)["result"]
    # a 512 x 768 canvas: x spans -256..256, y -384..384; box 2 named a character ("2;" - any separator)
    (out,) = MOSSImageLayoutPrompt().execute("A knight with a rose.", elements, 512, 768, "2;")
    assert json.loads(out) == {
        "summary": {"caption": "A knight with a rose."},
        "items": [
            {"label": "text", "bbox": [-384, -256, -192, 0], "text": "MOSS", "caption": "title"},
            {"label": "character", "bbox": [-192, -128, 384, 128], "caption": "a knight"},
            {"label": "object", "bbox": [192, 128, 384, 256], "caption": "a rose", "palette": ["#FF0000"]},
        ],
        "bbox_format": "yxyx",
        "bbox_coord_space": "abs_centralized",
    }


def test_a_text_box_stays_text_when_listed_as_a_character():
    element = {"type": "text", "bbox": [0, 0, 500, 500], "text": "HI", "desc": "sign"}
    (out,) = MOSSImageLayoutPrompt().execute("p", [element], 1000, 1000, "1")
    assert json.loads(out)["items"][0]["label"] == "text"


@pytest.mark.parametrize(
    "element,match",
    [("boxes", "expected the ARRAY"), ([{"desc": "no box"}], "item 1 has no bbox"), ([3], "item 1 is int")],
)
def test_bad_elements_are_refused_by_name(element, match):
    with pytest.raises(ValueError, match=f"element: .*{match}"):
        MOSSImageLayoutPrompt().execute("a prompt", element, 1024, 1024, "")


def test_the_templates_layout_node_converts_and_runs(registry):
    """image_moss_image_t2i_bboxes: the template's Create Bounding Boxes canvas and layout widgets reach the API
    prompt, and the layout it gives has the template's four boxes, box 2 (the knight) as its character."""
    from comfy_bridge.formats import ui_to_api

    ui = json.loads((templates_coverage.templates_dir() / "image_moss_image_t2i_bboxes.json").read_text())
    nodes = [n for n in ui["nodes"] if n["type"] in ("CreateBoundingBoxes", "MOSSImageLayoutPrompt")]
    (boxes_node,) = [n for n in nodes if n["type"] == "CreateBoundingBoxes"]
    (layout_node,) = [n for n in nodes if n["type"] == "MOSSImageLayoutPrompt"]
    for node in nodes:  # unlink the resolution selector's sizes so the widgets stand
        for socket in node.get("inputs", []):
            if socket.get("widget"):
                socket["link"] = None
    link = [7, boxes_node["id"], 2, layout_node["id"], 0, "ARRAY"]
    layout_node["inputs"][0]["link"] = 7
    api = ui_to_api({"nodes": nodes, "links": [link]}, registry)
    inputs = api[str(layout_node["id"])]["inputs"]
    assert (inputs["width"], inputs["height"], inputs["character_boxes"]) == (1024, 1024, "2")
    assert inputs["element"] == [str(boxes_node["id"]), 2]
    boxes = api[str(boxes_node["id"])]["inputs"]
    (_, _, elements) = CreateBoundingBoxes().execute(
        boxes["width"], boxes["height"], boxes["editor_state"]["__value__"]
    )["result"]
    (out,) = MOSSImageLayoutPrompt().execute(inputs["prompt"], elements, 1024, 1024, inputs["character_boxes"])
    layout = json.loads(out)
    assert layout["summary"]["caption"] == inputs["prompt"]
    assert [i["label"] for i in layout["items"]][:2] == ["text", "character"]
    assert layout["items"][0]["text"] == "MOSS"
    assert all(-512 <= v <= 512 for item in layout["items"] for v in item["bbox"])
