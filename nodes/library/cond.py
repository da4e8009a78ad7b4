"""CLIPTextEncodeControlnet (ComfyUI's comfy_extras.nodes_cond): a separate prompt for the ControlNets.

The prompt's embeddings go into each conditioning entry as "cross_attn_controlnet" (and its pooled output as
"pooled_output_controlnet", kept as ComfyUI keeps it); the ControlNets applied to the entry attend to them
instead of the entry's own embeddings, while the diffusion model still sees the entry's.
"""
from __future__ import annotations

from nodes.conditioning import require
from nodes.ksampler import call_model_fn
from nodes.model_nodes import _require


class CLIPTextEncodeControlnet:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "clip": ("CLIP", {}),
            "conditioning": ("CONDITIONING", {}),
            "text": ("STRING", {"multiline": True, "dynamicPrompts": True,
                                "tooltip": "The prompt the ControlNets of this conditioning attend to."}),
        }}

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "execute"
    CATEGORY = "_for_testing/conditioning"
    EXPERIMENTAL = True
    DESCRIPTION = "Gives the ControlNets applied to the conditioning their own prompt."
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_cond"

    async def execute(self, clip, conditioning: list, text: str):
        conditioning = require(conditioning, "conditioning")
        clip = _require(clip, "text_encoder", "clip")
        out = await call_model_fn("text_encode", clip, "clip", {}, {"text": text})
        return ([[cond, {**opts, "cross_attn_controlnet": out["cond"], "pooled_output_controlnet": out.get("pooled")}]
                 for cond, opts in conditioning],)


NODE_CLASS_MAPPINGS = {"CLIPTextEncodeControlnet": CLIPTextEncodeControlnet}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
