"""ComfyUI's PreviewAny (`comfy_extras.nodes_preview_any`): shows any value as text in the UI."""

from __future__ import annotations

import json
from typing import Any


def preview_text(source: Any) -> str:
    """Strings as they are, numbers and booleans with str(), other values as JSON, and what JSON cannot
    hold (tensors, latents) with str()."""
    if isinstance(source, str):
        return source
    if isinstance(source, (int, float, bool)):
        return str(source)
    if source is None:
        return "None"
    try:
        return json.dumps(source)
    except Exception:
        try:
            return str(source)
        except Exception:
            return "source exists, but could not be serialized."


class PreviewAny:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_preview_any"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"source": ("*", {})}}

    # today's ComfyUI also hands the text on (the Bernini-R templates turn a combo's index into a string with it;
    # 0.3.64's has no output)
    RETURN_TYPES = ("STRING",)
    FUNCTION = "main"
    OUTPUT_NODE = True
    CATEGORY = "utils"
    DESCRIPTION = "Shows the value it receives as text in the UI (JSON for lists and dicts) and passes that text on."

    def main(self, source: Any = None):
        text = preview_text(source)
        return {"ui": {"text": (text,)}, "result": (text,)}


NODE_CLASS_MAPPINGS = {"PreviewAny": PreviewAny}
NODE_DISPLAY_NAME_MAPPINGS = {"PreviewAny": "Preview Any"}
