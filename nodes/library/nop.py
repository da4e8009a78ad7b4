"""ComfyUI's comfy_extras.nodes_nop: wanBlockSwap, kept so that old Wan workflows still load; ComfyUI made it hand
the model on unchanged (its memory management does the offloading), and so does ours."""

from __future__ import annotations

from typing import Any


class wanBlockSwap:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_nop"
    FUNCTION = "execute"
    CATEGORY = ""
    DEPRECATED = True
    RETURN_TYPES = ("MODEL",)
    OUTPUT_TOOLTIPS = (None,)
    DESCRIPTION = "Does nothing: the model passes through unchanged (kept for old Wan workflows)."

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL", {})}}

    def execute(self, model: Any):
        return (model,)


NODE_CLASS_MAPPINGS = {"wanBlockSwap": wanBlockSwap}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
