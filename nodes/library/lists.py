"""Today's ComfyUI list nodes (`comfy_extras.nodes_toolkit`, added after 0.3.64). ComfyUI runs a node once per
item of a list output (list expansion); these two take whole lists (INPUT_IS_LIST): Create List joins the
items of its linked inputs into one list output, Get Item From List picks one item of a list."""

from __future__ import annotations

from typing import Any

from nodes.dynamic_inputs import ANY, DynamicSection, autogrow_prefix, group

MODULE = "comfy_extras.nodes_toolkit"
INPUTS = autogrow_prefix("input", (ANY, {}), prefix="input", minimum=1, maximum=10)


class CreateList:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "utilities"
    INPUT_IS_LIST = True

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": DynamicSection({"inputs": INPUTS})}

    RETURN_TYPES = (ANY,)
    RETURN_NAMES = ("list",)
    OUTPUT_IS_LIST = (True,)
    OUTPUT_TOOLTIPS = (None,)
    SEARCH_ALIASES = ["Image Iterator", "Text Iterator", "Iterator"]
    DESCRIPTION = (
        "One list of the items of input0, input1, ... in that order (a linked list output gives all "
        "its items); the nodes it feeds run once per item."
    )

    def execute(self, **kwargs: Any):
        items: list = []
        for values in group(kwargs, "inputs", INPUTS).values():
            items += values
        return (items,)


class GetItemFromList:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "utilities"
    INPUT_IS_LIST = True

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"list": (ANY, {}), "index": ("INT", {"default": 0})},
            "hidden": {"dynprompt": ("DYNPROMPT",), "unique_id": ("UNIQUE_ID",)},
        }

    RETURN_TYPES = (ANY,)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = "The item at `index` of the list (negative indices count from the end)."

    def execute(self, list: list, index: list[int], **hidden: Any):
        at = index[0]
        if not -len(list) <= at < len(list):
            raise IndexError(f"Get Item From List: index {at} is outside the list of {len(list)} items")
        return (list[at],)


NODE_CLASS_MAPPINGS = {"CreateList": CreateList, "GetItemFromList": GetItemFromList}
NODE_DISPLAY_NAME_MAPPINGS = {"CreateList": "Create List", "GetItemFromList": "Get Item From List"}
