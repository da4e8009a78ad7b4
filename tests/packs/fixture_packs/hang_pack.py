import time


class HangNode:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"
    CATEGORY = "hang_pack"

    def run(self, image):
        time.sleep(3600)
        return (image,)


NODE_CLASS_MAPPINGS = {"HangNode": HangNode}
