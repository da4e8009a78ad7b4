class RaisingNode:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"
    CATEGORY = "raising_pack"

    def run(self, image):
        raise ValueError("raising_pack refuses this image")


NODE_CLASS_MAPPINGS = {"RaisingNode": RaisingNode}
