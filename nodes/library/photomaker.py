"""PhotoMaker's nodes (ComfyUI's comfy_extras.nodes_photomaker, 0.3.64): PhotoMakerLoader reads a PhotoMaker v1
file from models/photomaker; PhotoMakerEncode encodes the prompt and fuses the reference face's identity into the
state of the class word in front of the trigger word "photomaker" (nodes/models/photomaker.py, run as the
`photomaker_fuse` ModelFn).

As ComfyUI 0.3.64 does it: the trigger is found as a space-separated word of the text; the tokens of the word with
that (1-based) word id are left out of the prompt (0.3.64's tokenizer numbers weighted segments, not words, so a
plain prompt keeps every token); the fused row is the token at that word id minus one; only the first image is
used; without the trigger the prompt is encoded as CLIPTextEncode encodes it."""

from __future__ import annotations

import torch

from cluster.refs import ModelRef
from nodes.inputs import require_component, require_ref
from nodes.ksampler import call_model_fn
from nodes.loaders import make_ref, model_file
from nodes.models.clip_vision import preprocess
from nodes.workspace import active

COMPONENT = "photomaker"
TRIGGER = "photomaker"
MODULE = "comfy_extras.nodes_photomaker"
CLIP_SIZE = 224  # PhotoMaker's ViT-L input


class PhotoMakerLoader:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "_for_testing/photomaker"
    EXPERIMENTAL = True
    RETURN_TYPES = ("PHOTOMAKER",)

    @classmethod
    def INPUT_TYPES(cls):
        files = active().list_files("photomaker")
        return {"required": {"photomaker_model_name": ("COMBO", {"multiselect": False, "options": files})}}

    def execute(self, photomaker_model_name: str) -> tuple[ModelRef]:
        path = model_file("photomaker", photomaker_model_name, "photomaker_model_name")
        return (make_ref(COMPONENT, "photomaker_v1", [path]),)


class PhotoMakerEncode:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "_for_testing/photomaker"
    EXPERIMENTAL = True
    RETURN_TYPES = ("CONDITIONING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "photomaker": ("PHOTOMAKER", {}),
                "image": ("IMAGE", {}),
                "clip": ("CLIP", {}),
                "text": ("STRING", {"default": "photograph of photomaker", "dynamicPrompts": True, "multiline": True}),
            }
        }

    async def execute(self, photomaker, image: torch.Tensor, clip, text: str):
        photomaker = require_ref(photomaker, COMPONENT, "photomaker", "PHOTOMAKER")
        clip = require_component(clip, "text_encoder", "clip")
        words = text.split(" ")
        index = words.index(TRIGGER) + 1 if TRIGGER in words else -1
        params = {"text": text, "drop_word": index} if index > 0 else {"text": text}
        out = await call_model_fn("text_encode", clip, "clip", {}, params)
        cond, pooled = out["cond"], out.get("pooled")
        if index > 0:
            pixels = preprocess(image, CLIP_SIZE, crop=True).float()
            fused = await call_model_fn(
                "photomaker_fuse",
                photomaker,
                "photomaker",
                {"pixel_values": pixels, "prompt_embeds": cond},
                {"class_token": index - 1},
            )
            cond = fused["cond"]
        return ([[cond, {"pooled_output": pooled}]],)


NODE_CLASS_MAPPINGS = {"PhotoMakerLoader": PhotoMakerLoader, "PhotoMakerEncode": PhotoMakerEncode}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
