"""A pack whose node takes and gives VIDEO and AUDIO values (the objects of comfy_api's video types)."""

import os


class MediaPassThrough:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"video": ("VIDEO",)}, "optional": {"audio": ("AUDIO",)}}

    RETURN_TYPES = ("IMAGE", "VIDEO", "AUDIO", "STRING")
    RETURN_NAMES = ("frames", "video", "quieter", "pid")
    FUNCTION = "run"
    CATEGORY = "media_pack"

    def run(self, video, audio=None):
        quieter = None if audio is None else {"waveform": audio["waveform"] * 0.5, "sample_rate": audio["sample_rate"]}
        return video.get_components().images, video, quieter, str(os.getpid())


NODE_CLASS_MAPPINGS = {"MediaPassThrough": MediaPassThrough}
