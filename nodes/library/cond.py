"""ComfyUI's comfy_extras.nodes_cond: CLIPTextEncodeControlnet, a separate prompt for the ControlNets, and
T5TokenizerOptions, the padding of T5 prompts.

CLIPTextEncodeControlnet: the prompt's embeddings go into each conditioning entry as "cross_attn_controlnet" (and its pooled output as
"pooled_output_controlnet", kept as ComfyUI keeps it); the ControlNets applied to the entry attend to them
instead of the entry's own embeddings, while the diffusion model still sees the entry's.
"""

from __future__ import annotations

from nodes.conditioning import require
from nodes.inputs import require_component
from nodes.ksampler import call_model_fn


class CLIPTextEncodeControlnet:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "clip": ("CLIP", {}),
                "conditioning": ("CONDITIONING", {}),
                "text": (
                    "STRING",
                    {
                        "multiline": True,
                        "dynamicPrompts": True,
                        "tooltip": "The prompt the ControlNets of this conditioning attend to.",
                    },
                ),
            }
        }

    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "execute"
    CATEGORY = "_for_testing/conditioning"
    EXPERIMENTAL = True
    DESCRIPTION = "Gives the ControlNets applied to the conditioning their own prompt."
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_cond"

    async def execute(self, clip, conditioning: list, text: str):
        conditioning = require(conditioning, "conditioning")
        clip = require_component(clip, "text_encoder", "clip")
        out = await call_model_fn("text_encode", clip, "clip", {}, {"text": text})
        return (
            [
                [cond, {**opts, "cross_attn_controlnet": out["cond"], "pooled_output_controlnet": out.get("pooled")}]
                for cond, opts in conditioning
            ],
        )


# The T5 sub-encoders ComfyUI's node sets the options for; our Flux CLIP's T5 is "t5xxl", the others are kept
# on the CLIP as ComfyUI keeps them.
T5_TYPES = ("t5xxl", "pile_t5xl", "t5base", "mt5xl", "umt5xxl")


class T5TokenizerOptions:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "clip": ("CLIP", {}),
                "min_padding": (
                    "INT",
                    {
                        "default": 0,
                        "min": 0,
                        "max": 10000,
                        "step": 1,
                        "tooltip": "Pad tokens always added after the prompt.",
                    },
                ),
                "min_length": (
                    "INT",
                    {
                        "default": 0,
                        "min": 0,
                        "max": 10000,
                        "step": 1,
                        "tooltip": "Pad the prompt to at least this many tokens (0: no minimum).",
                    },
                ),
            }
        }

    RETURN_TYPES = ("CLIP",)
    FUNCTION = "execute"
    CATEGORY = "_for_testing/conditioning"
    EXPERIMENTAL = True
    DESCRIPTION = (
        "Sets how T5 prompts are padded (Flux's T5 pads to 256 tokens by default); other text encoders are unaffected."
    )
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_cond"

    def execute(self, clip, min_padding: int, min_length: int):
        clip = require_component(clip, "text_encoder", "clip")
        options = dict(clip.option("tokenizer_options", ()))
        for t5 in T5_TYPES:
            options.update({f"{t5}_min_padding": min_padding, f"{t5}_min_length": min_length})
        return (clip.with_option("tokenizer_options", tuple(sorted(options.items()))),)


NODE_CLASS_MAPPINGS = {"CLIPTextEncodeControlnet": CLIPTextEncodeControlnet, "T5TokenizerOptions": T5TokenizerOptions}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
