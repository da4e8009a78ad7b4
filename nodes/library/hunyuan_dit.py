"""CLIPTextEncodeHunyuanDiT (ComfyUI 0.3.64's comfy_extras.nodes_hunyuan): one prompt for HunyuanDiT's BERT encoder
and one for its mT5-XL encoder (nodes/models/hunyuan_dit_text.py). The conditioning holds BERT's states, with
BERT's mask, mT5's states and mT5's mask beside them, as ComfyUI's does."""

from __future__ import annotations

from nodes.inputs import require_component
from nodes.ksampler import call_model_fn
from nodes.library.clip_sdxl import TEXT
from nodes.modelfns.hooks import encodings
from nodes.models.hunyuan_dit_text import BERT, MASK_KEY, MT5, MT5_MASK_KEY, MT5_STATES


class CLIPTextEncodeHunyuanDiT:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_hunyuan"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"clip": ("CLIP", {}), "bert": TEXT, "mt5xl": TEXT}}

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "encode"
    CATEGORY = "advanced/conditioning"
    DESCRIPTION = "Encodes a prompt for HunyuanDiT's BERT text encoder and another for its mT5-XL encoder."

    async def encode(self, clip, bert: str, mt5xl: str):
        clip = require_component(clip, "text_encoder", "clip")
        if clip.arch != "hunyuan_dit":
            raise ValueError(
                f"clip: CLIPTextEncodeHunyuanDiT needs HunyuanDiT's CLIP (BERT and mT5-XL), got a {clip.arch} CLIP"
            )
        conditioning = []
        for ref, extra in encodings(clip):
            out = await call_model_fn("text_encode", ref, "clip", {}, {"texts": {BERT: bert, MT5: mt5xl}})
            beside = {k: out[k] for k in (MASK_KEY, MT5_STATES, MT5_MASK_KEY)}
            conditioning.append([out["cond"], {"pooled_output": out.get("pooled"), **beside, **extra}])
        return (conditioning,)


NODE_CLASS_MAPPINGS = {"CLIPTextEncodeHunyuanDiT": CLIPTextEncodeHunyuanDiT}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
