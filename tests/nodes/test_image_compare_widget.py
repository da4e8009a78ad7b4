"""Image Compare's slider widget (IMAGECOMPARE, required, socketless) in a saved workflow without its value, as
today's templates hold it (the Marigold V2, Qwen Image 2.1 edit and FLUX 3 edit templates: widgets_values []): the
web UI's widget starts as ['', ''] and is sent as {"__value__": ['', '']}, so the converted prompt validates instead
of the node failing with "Required input is missing: compare_view"; a saved value is taken as it is."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from comfy_bridge.formats import ui_to_api
from comfy_bridge.registry import build_registry
from comfy_bridge.validation import validate_prompt


@pytest.fixture(scope="module")
def registry():
    return build_registry(None, load_custom_nodes=False)


def workflow(values: list) -> dict:
    image = {"id": 1, "type": "EmptyImage", "mode": 0, "widgets_values": [8, 8, 1, 0], "inputs": [], "outputs": []}
    compare = {
        "id": 2,
        "type": "ImageCompare",
        "mode": 0,
        "widgets_values": values,
        "inputs": [{"name": "image_a", "type": "IMAGE", "link": 1}, {"name": "image_b", "type": "IMAGE", "link": 2}],
        "outputs": [],
    }
    return {"nodes": [image, compare], "links": [[1, 1, 0, 2, 0, "IMAGE"], [2, 1, 0, 2, 1, "IMAGE"]]}


def test_missing_slider_value_is_the_web_uis_initial_one(registry):
    prompt = ui_to_api(workflow([]), registry)
    assert prompt["2"]["inputs"] == {"compare_view": {"__value__": ["", ""]}, "image_a": ["1", 0], "image_b": ["1", 0]}
    result = validate_prompt(registry, "p", prompt, None)
    result = asyncio.run(result) if inspect.isawaitable(result) else result
    assert result[0] is True and result[3] == {}, result


def test_saved_slider_value_is_kept(registry):
    prompt = ui_to_api(workflow([["a.png", "b.png"]]), registry)
    assert prompt["2"]["inputs"]["compare_view"] == {"__value__": ["a.png", "b.png"]}
