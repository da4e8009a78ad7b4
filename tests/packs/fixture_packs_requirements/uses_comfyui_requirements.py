"""A pack as many are written: it imports at module level what ComfyUI's own requirements.txt installs,
listing none of it (einops, PyAV, sentencepiece, kornia)."""

import av
import einops
import kornia
import sentencepiece


class RearrangeToChannels:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ("IMAGE", "STRING")
    FUNCTION = "run"
    CATEGORY = "uses_comfyui_requirements"

    def run(self, image):
        chw = einops.rearrange(image, "b h w c -> b c h w")
        gray = kornia.color.rgb_to_grayscale(chw)
        modules = ",".join(m.__name__ for m in (av, einops, kornia, sentencepiece))
        return (einops.rearrange(gray.expand(-1, 3, -1, -1), "b c h w -> b h w c"), modules)


NODE_CLASS_MAPPINGS = {"RearrangeToChannels": RearrangeToChannels}
