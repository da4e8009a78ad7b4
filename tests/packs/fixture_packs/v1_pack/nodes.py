class V1Invert:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "invert"
    CATEGORY = "v1_pack"

    def invert(self, image):
        return (1.0 - image,)


class V1ListsFromInputTypes:
    """Keeps what INPUT_TYPES loads on the class and reads it when it runs (comfyui-portrait-master does),
    and takes a wildcard input whose type equals every type name (Easy-Use's AlwaysEqualProxy)."""

    @classmethod
    def INPUT_TYPES(cls):
        cls.choices = ["first", "second"]
        return {"required": {"pick": (cls.choices,), "anything": (AlwaysEqual("*"), {"default": 0})}}

    RETURN_TYPES = ("STRING",)
    FUNCTION = "run"
    CATEGORY = "v1_pack"

    def run(self, pick, anything):
        return (f"{self.choices.index(pick)} {anything!r}",)


class AlwaysEqual(str):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__
