"""Today's ComfyUI logic nodes (`comfy_extras.nodes_logic`, added after 0.3.64): the If/Else switch with lazy
branches, Not / And / Or, Pass or None, and the Custom Combo whose options the web UI keeps."""

from __future__ import annotations

from typing import Any

from nodes.dynamic_inputs import ANY, DynamicSection, autogrow_prefix, group, match_type

MODULE = "comfy_extras.nodes_logic"
# Told apart from None: ComfyUI passes None for a linked branch not evaluated yet, and nothing for an unlinked one.
MISSING: Any = object()


class _LogicNode:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "utilities/logic"


class ComfySwitchNode(_LogicNode):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"switch": ("BOOLEAN", {})},
            "optional": {"on_false": match_type("switch", lazy=True), "on_true": match_type("switch", lazy=True)},
        }

    RETURN_TYPES = (match_type("switch")[0],)
    RETURN_NAMES = ("output",)
    OUTPUT_TOOLTIPS = (None,)
    OUTPUT_MATCHTYPES = ("switch",)
    EXPERIMENTAL = True
    SEARCH_ALIASES = ["if", "then", "switch", "conditional", "branch"]
    DESCRIPTION = "Passes on_true when switch is on, else on_false; only the branch passed on is computed."

    def check_lazy_status(self, switch: bool, on_false: Any = MISSING, on_true: Any = MISSING) -> list[str]:
        # Ask only for the chosen branch, and only while it is linked but not computed yet (None).
        wanted = "on_true" if switch else "on_false"
        value = on_true if switch else on_false
        return [wanted] if value is None else []

    def execute(self, switch: bool, on_false: Any = MISSING, on_true: Any = MISSING):
        chosen = on_true if switch else on_false
        return (None if chosen is MISSING else chosen,)


class ComfyNotNode(_LogicNode):
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": (ANY, {})}}

    RETURN_TYPES = ("BOOLEAN",)
    OUTPUT_TOOLTIPS = (None,)
    SEARCH_ALIASES = ["invert", "toggle", "negate", "flip boolean"]
    DESCRIPTION = "True when the value is false, empty, zero or None (Python's truth rules)."

    def execute(self, value: Any):
        return (not value,)


class _AllOrAny(_LogicNode):
    VALUES = autogrow_prefix("value", (ANY, {}), prefix="value", minimum=1, maximum=10)
    RETURN_TYPES = ("BOOLEAN",)
    OUTPUT_TOOLTIPS = (None,)
    COMBINE = staticmethod(all)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": DynamicSection({"values": cls.VALUES})}

    def execute(self, **kwargs: Any):
        return (self.COMBINE(group(kwargs, "values", self.VALUES).values()),)


class ComfyAndNode(_AllOrAny):
    SEARCH_ALIASES = ["all", "every"]
    DESCRIPTION = "True when every linked value is true by Python's truth rules."


class ComfyOrNode(_AllOrAny):
    COMBINE = staticmethod(any)
    SEARCH_ALIASES = ["any", "some"]
    DESCRIPTION = "True when at least one linked value is true by Python's truth rules."


class ComfyPassOrNoneNode(_LogicNode):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "optional": {
                "anything": match_type("value", tooltip="The value passed on when it is there (not None)."),
                "default": match_type("value", tooltip="Passed on instead when `anything` is None or unlinked."),
            }
        }

    RETURN_TYPES = (match_type("value")[0], "BOOLEAN")
    RETURN_NAMES = ("output", "is_none")
    OUTPUT_TOOLTIPS = (None, None)
    OUTPUT_MATCHTYPES = ("value", None)
    SEARCH_ALIASES = ["fallback", "null", "nothing", "empty", "blank"]
    DESCRIPTION = "Passes `anything` on, or `default` when it is None; is_none tells when both are None."

    def execute(self, anything: Any = None, default: Any = None):
        if anything is None:
            return (default, default is None)
        return (anything, False)


class CustomCombo:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "utilities"

    @classmethod
    def INPUT_TYPES(cls):
        # The web UI keeps the user's options (and the chosen index) in widgets of its own and sends them all.
        return {
            "required": DynamicSection({"choice": ("COMBO", {"multiselect": False, "options": []})}, accept_all=True)
        }

    RETURN_TYPES = ("STRING", "INT")
    RETURN_NAMES = ("STRING", "INDEX")
    OUTPUT_TOOLTIPS = (None, None)
    EXPERIMENTAL = True
    DESCRIPTION = "A combo whose options the user writes; gives the chosen text and its index."

    @classmethod
    def VALIDATE_INPUTS(cls, choice: str, **kwargs: Any) -> bool:
        return True  # the options live in the workflow, not here: any choice is valid

    def execute(self, choice: str, index: int = 0, **kwargs: Any):
        return (choice, index)


NODE_CLASS_MAPPINGS = {
    cls.__name__: cls
    for cls in (ComfySwitchNode, ComfyNotNode, ComfyAndNode, ComfyOrNode, ComfyPassOrNoneNode, CustomCombo)
}

NODE_DISPLAY_NAME_MAPPINGS = {
    "ComfySwitchNode": "If/Else Switch",
    "ComfyNotNode": "Not",
    "ComfyAndNode": "And",
    "ComfyOrNode": "Or",
    "ComfyPassOrNoneNode": "Pass or None",
    "CustomCombo": "Custom Combo",
}
