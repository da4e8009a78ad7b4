"""ComfyUI's comfy_extras.nodes_hidream: HiDream's text-encoder loader and prompt encoder.

- QuadrupleCLIPLoader: four text-encoder files as one CLIP (HiDream's recipe: long CLIP-L, long CLIP-G,
  T5-XXL, Llama 3.1 8B Instruct; which file is which is read from the weights, so the order does not matter).
- CLIPTextEncodeHiDream: a prompt per text encoder; CLIP-L and CLIP-G give the pooled vector, T5-XXL the
  conditioning and the Llama the states that travel beside it (nodes/models/hidream_text.py).
"""

from __future__ import annotations

from nodes.inputs import require_component
from nodes.ksampler import call_model_fn
from nodes.library.clip_sdxl import TEXT
from nodes.loaders import make_ref, model_file, model_files
from nodes.modelfns.hooks import encodings
from nodes.models.components import HIDREAM_KEYS

MODULE = "comfy_extras.nodes_hidream"


class QuadrupleCLIPLoader:
    @classmethod
    def INPUT_TYPES(cls):
        files = ("COMBO", {"multiselect": False, "options": model_files("text_encoders")})
        return {"required": {f"clip_name{i}": files for i in (1, 2, 3, 4)}}

    MODEL_FILE_INPUTS = {f"clip_name{i}": ("text_encoders", "text_encoder") for i in (1, 2, 3, 4)}
    RETURN_TYPES = ("CLIP",)
    FUNCTION = "load_clip"
    CATEGORY = "advanced/loaders"
    DESCRIPTION = "[Recipes]\n\nhidream: long clip-l, long clip-g, t5xxl, llama_8b_3.1_instruct"
    RELATIVE_PYTHON_MODULE = MODULE

    def load_clip(self, clip_name1: str, clip_name2: str, clip_name3: str, clip_name4: str):
        names = (clip_name1, clip_name2, clip_name3, clip_name4)
        paths = [model_file("text_encoders", name, f"clip_name{i}") for i, name in enumerate(names, start=1)]
        return (make_ref("text_encoder", "hidream", paths, clip_type="hidream"),)


class CLIPTextEncodeHiDream:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"clip": ("CLIP", {}), "clip_l": TEXT, "clip_g": TEXT, "t5xxl": TEXT, "llama": TEXT}}

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "encode"
    CATEGORY = "advanced/conditioning"
    DESCRIPTION = "Encodes a separate prompt for each of HiDream's text encoders (CLIP-L, CLIP-G, T5-XXL, Llama)."
    RELATIVE_PYTHON_MODULE = MODULE

    async def encode(self, clip, clip_l: str, clip_g: str, t5xxl: str, llama: str):
        clip = require_component(clip, "text_encoder", "clip")
        if clip.arch != "hidream":
            raise ValueError(
                f"clip: CLIPTextEncodeHiDream needs HiDream's CLIP (QuadrupleCLIPLoader), got a {clip.arch} CLIP"
            )
        params = {"texts": {"g": clip_g, "l": clip_l, "t5xxl": t5xxl, "llama": llama}}
        conditioning = []
        for ref, extra in encodings(clip):  # one, or one per keyframe range of a scheduled hooked CLIP
            out = await call_model_fn("text_encode", ref, "clip", {}, params)
            llama_states = {k: out[k] for k in HIDREAM_KEYS if k in out}  # ComfyUI's conditioning_llama3
            conditioning.append([out["cond"], {"pooled_output": out.get("pooled"), **llama_states, **extra}])
        return (conditioning,)


NODE_CLASS_MAPPINGS = {
    "QuadrupleCLIPLoader": QuadrupleCLIPLoader,
    "CLIPTextEncodeHiDream": CLIPTextEncodeHiDream,
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}  # ComfyUI gives neither class a display name
