"""ComfyUI's primitive nodes (`comfy_extras.nodes_primitive`): a widget whose value is the node's output,
so one constant can feed many inputs."""

from __future__ import annotations

import sys

MODULE = "comfy_extras.nodes_primitive"


class _Primitive:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "utils/primitive"

    def execute(self, value: object):
        return (value,)


class PrimitiveString(_Primitive):
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("STRING", {"multiline": False})}}

    RETURN_TYPES = ("STRING",)
    DESCRIPTION = "A one-line text constant."


class PrimitiveStringMultiline(_Primitive):
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("STRING", {"multiline": True})}}

    RETURN_TYPES = ("STRING",)
    DESCRIPTION = "A multi-line text constant."


class PrimitiveInt(_Primitive):
    @classmethod
    def INPUT_TYPES(cls):
        # the whole 64-bit range; the frontend offers a control (fixed/increment/randomize) after each run
        return {
            "required": {"value": ("INT", {"min": -sys.maxsize, "max": sys.maxsize, "control_after_generate": True})}
        }

    RETURN_TYPES = ("INT",)
    DESCRIPTION = "An integer constant."


class PrimitiveFloat(_Primitive):
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT", {"min": -sys.maxsize, "max": sys.maxsize})}}

    RETURN_TYPES = ("FLOAT",)
    DESCRIPTION = "A floating-point constant."


class PrimitiveBoolean(_Primitive):
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("BOOLEAN", {})}}

    RETURN_TYPES = ("BOOLEAN",)
    DESCRIPTION = "A true/false constant."


NODE_CLASS_MAPPINGS = {
    "PrimitiveString": PrimitiveString,
    "PrimitiveStringMultiline": PrimitiveStringMultiline,
    "PrimitiveInt": PrimitiveInt,
    "PrimitiveFloat": PrimitiveFloat,
    "PrimitiveBoolean": PrimitiveBoolean,
}

NODE_DISPLAY_NAME_MAPPINGS = {
    "PrimitiveString": "String",
    "PrimitiveStringMultiline": "String (Multiline)",
    "PrimitiveInt": "Int",
    "PrimitiveFloat": "Float",
    "PrimitiveBoolean": "Boolean",
}
