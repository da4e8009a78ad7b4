"""Today's ComfyUI text nodes beyond 0.3.64's (`comfy_extras.nodes_string`): Format Text (Python's
str.format over a growing group of inputs a..z), Extract Text from JSON, and the dictionary / array to
JSON text converters."""

from __future__ import annotations

import json
import re
import string
from typing import Any

from nodes.dynamic_inputs import ANY, DynamicSection, autogrow_names, group

MODULE = "comfy_extras.nodes_string"
VALUES = autogrow_names("value", (ANY, {}), list(string.ascii_lowercase), minimum=0)
INDENT = ("INT", {"default": 2, "min": 0, "max": 8, "tooltip": "Spaces per level; 0 writes one line."})


class _TextNode:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "text"
    RETURN_TYPES = ("STRING",)
    OUTPUT_TOOLTIPS = (None,)


class StringFormat(_TextNode):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": DynamicSection(
                {"values": VALUES, "f_string": ("STRING", {"default": "{a}", "multiline": True})}
            )
        }

    SEARCH_ALIASES = ["string", "format"]
    DESCRIPTION = "Python's str.format: {a}, {b:.2f}, {c!r} ... filled from the linked values."

    def execute(self, f_string: str, **kwargs: Any):
        values = group(kwargs, "values", VALUES)
        try:
            return (f_string.format(**values),)
        except (KeyError, IndexError) as ex:
            raise ValueError(
                f"Format Text: {f_string!r} names {ex} but the linked values are {', '.join(values) or 'none'}"
            ) from None


def first_json_object(text: str) -> dict | None:
    """The first JSON object that decodes at one of the text's '{' (prose and code fences around it skipped)."""
    decoder = json.JSONDecoder()
    for brace in re.finditer(r"\{", text):
        try:
            return decoder.raw_decode(text, brace.start())[0]
        except json.JSONDecodeError:
            continue
    return None


class JsonExtractString(_TextNode):
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"json_string": ("STRING", {"multiline": True}), "key": ("STRING", {"multiline": False})}}

    SEARCH_ALIASES = ["json", "extract json", "parse json", "json value", "read json"]
    DESCRIPTION = (
        "The value of `key` in the first JSON object found in the text (e.g. an LLM's answer in a "
        "code block), as text; empty when there is none or it is null."
    )

    def execute(self, json_string: str, key: str):
        found = first_json_object(json_string)
        value = None if found is None else found.get(key)
        return ("" if value is None else str(value),)


def _dump(value: Any, indent: int) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent or None)


class ConvertDictionaryToString(_TextNode):
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"dictionary": ("DICT", {}), "indent": INDENT}}

    SEARCH_ALIASES = ["json", "dict to json", "stringify", "serialize", "dict to string"]
    DESCRIPTION = "The dictionary as JSON text."

    def execute(self, dictionary: dict, indent: int = 2):
        return (_dump(dictionary, indent),)


class ConvertArrayToString(_TextNode):
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"array": ("ARRAY", {}), "indent": INDENT}}

    SEARCH_ALIASES = ["json", "list to json", "stringify", "serialize", "list to string", "array to json"]
    DESCRIPTION = "The array as JSON text."

    def execute(self, array: list, indent: int = 2):
        return (_dump(array, indent),)


NODE_CLASS_MAPPINGS = {
    cls.__name__: cls for cls in (StringFormat, JsonExtractString, ConvertDictionaryToString, ConvertArrayToString)
}
NODE_DISPLAY_NAME_MAPPINGS = {
    "StringFormat": "Format Text",
    "JsonExtractString": "Extract Text from JSON",
    "ConvertDictionaryToString": "Convert Dictionary to String",
    "ConvertArrayToString": "Convert Array to String",
}
