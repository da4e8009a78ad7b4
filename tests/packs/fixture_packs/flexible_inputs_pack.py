"""Input patterns of rgthree's Power Puter (and its other dynamic nodes): no required inputs, an
`optional` dict that claims every name (so widgets the web UI adds, such as `code`, are accepted), the
hidden inputs; and nodes that raise, a builtin TypeError and an exception class of the pack's own whose
constructor takes other arguments than it pickles, for ComfyUI's execution_error shape."""


class AnyType(str):
    """A type equal to every other type (rgthree's `any_type`)."""

    def __ne__(self, other: object) -> bool:
        return False


ANY = AnyType("*")


class FlexibleOptional(dict):
    """Claims every input name; unknown names are of type ANY."""

    def __init__(self, type_: str, data: dict | None = None) -> None:
        super().__init__()
        self.type = type_
        self.data = data
        for key, value in (data or {}).items():
            self[key] = value

    def __getitem__(self, key: str) -> tuple:
        if self.data is not None and key in self.data:
            return self.data[key]
        return (self.type,)

    def __contains__(self, key: object) -> bool:
        return True


class FlexiblePuter:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {},
            "optional": FlexibleOptional(ANY),
            "hidden": {
                "unique_id": "UNIQUE_ID",
                "extra_pnginfo": "EXTRA_PNGINFO",
                "prompt": "PROMPT",
                "dynprompt": "DYNPROMPT",
            },
        }

    RETURN_TYPES = ("STRING",)
    FUNCTION = "main"
    CATEGORY = "flexible_inputs_pack"

    def main(self, **kwargs):
        # as Power Puter does: a widget the web UI added, and every hidden input, read by name
        prompt_ok = kwargs["prompt"][kwargs["unique_id"]]["class_type"] == "FlexiblePuter"
        seen = kwargs["dynprompt"].get_node(kwargs["unique_id"])["class_type"]
        extra = sorted(k for k in kwargs if k not in ("code", "unique_id", "extra_pnginfo", "prompt", "dynprompt"))
        return (f"{kwargs['code']}|{prompt_ok}|{seen}|{kwargs['extra_pnginfo']}|{','.join(extra)}",)


class TypeErrorNode:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"text": ("STRING", {"default": "x"})}}

    RETURN_TYPES = ("STRING",)
    FUNCTION = "run"
    CATEGORY = "flexible_inputs_pack"

    def run(self, text):
        raise TypeError(f"flexible_inputs_pack cannot take {text!r}")


class PackFailure(Exception):
    def __init__(self, what, why):
        super().__init__(f"{what}: {why}")


class PackFailureNode(TypeErrorNode):
    def run(self, text):
        raise PackFailure(text, "the pack's own exception")


NODE_CLASS_MAPPINGS = {
    "FlexiblePuter": FlexiblePuter,
    "TypeErrorNode": TypeErrorNode,
    "PackFailureNode": PackFailureNode,
}
