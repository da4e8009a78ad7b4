"""A pack with a frontend extension: WEB_DIRECTORY JS that registers an extension and decorates this
pack's node, which the web UI must load and show."""

WEB_DIRECTORY = "./js"


class WebPackNode:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",), "gain": ("FLOAT", {"default": 1.5, "min": 0.0, "max": 4.0})}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"
    CATEGORY = "web_pack"

    def run(self, image, gain):
        return (image * gain,)


NODE_CLASS_MAPPINGS = {"WebPackNode": WebPackNode}
NODE_DISPLAY_NAME_MAPPINGS = {"WebPackNode": "Web Pack Gain"}
