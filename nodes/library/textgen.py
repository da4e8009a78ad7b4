"""Today's ComfyUI Generate Text (`comfy_extras.nodes_textgen`, added after 0.3.64): a text encoder's language
model writes text from a prompt (the web UI's templates use it to expand an image prompt). It runs as the
`text_generate` ModelFn on the executors; nodes.models.text_generate says how it generates.

Sampling "off" is greedy; "on" samples with the option's settings and seed. `thinking` changes only Krea 2's
Qwen3-VL (without it the template closes the reasoning block, as ComfyUI's Qwen3VL tokenizer does); `mtp` changes
nothing (no file here has a multi-token-prediction head), as in ComfyUI. Images, video and audio are read by
vision-language encoders only: Z-Image's and FLUX.2 Klein's Qwen3 ignore them, as ComfyUI's do; Qwen-Image's
are refused (generation here does not read images yet)."""

from __future__ import annotations

from typing import Any

from nodes.dynamic_inputs import DYNAMIC_COMBO, DynamicSection, combo_inputs
from nodes.inputs import require_component
from nodes.ksampler import call_model_fn

SAMPLING_ON = {
    "required": {
        "temperature": ("FLOAT", {"default": 0.7, "min": 0.01, "max": 2.0, "step": 0.000001}),
        "top_k": ("INT", {"default": 64, "min": 0, "max": 1000}),
        "top_p": ("FLOAT", {"default": 0.95, "min": 0.0, "max": 1.0, "step": 0.01}),
        "min_p": ("FLOAT", {"default": 0.05, "min": 0.0, "max": 1.0, "step": 0.01}),
        "repetition_penalty": ("FLOAT", {"default": 1.05, "min": 0.0, "max": 5.0, "step": 0.01}),
        "seed": ("INT", {"default": 0, "min": 0, "max": 0xFFFFFFFFFFFFFFFF}),
    },
    "optional": {"presence_penalty": ("FLOAT", {"default": 0.0, "min": 0.0, "max": 5.0, "step": 0.01})},
}
SAMPLING_MODE = (
    DYNAMIC_COMBO,
    {
        "display_name": "Sampling Mode",
        "options": [{"key": "on", "inputs": SAMPLING_ON}, {"key": "off", "inputs": {"required": {}}}],
    },
)
# ComfyUI's settings when sampling is off or an option leaves one out (greedy decoding reads none of them).
UNSET = {
    "temperature": 1.0,
    "top_k": 50,
    "top_p": 1.0,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "seed": 0,
}
MTP = ["auto", "off", "2", "3", "4", "5"]


class TextGenerate:
    RELATIVE_PYTHON_MODULE = "comfy_extras.nodes_textgen"
    FUNCTION = "execute"
    CATEGORY = "text"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": DynamicSection(
                {
                    "clip": ("CLIP", {}),
                    "prompt": ("STRING", {"default": "", "multiline": True, "dynamicPrompts": True}),
                    "max_length": ("INT", {"default": 512, "min": 1, "max": 32768}),
                    "sampling_mode": SAMPLING_MODE,
                }
            ),
            "optional": {
                "image": ("IMAGE", {}),
                "video": ("IMAGE", {"tooltip": "Video frames as an image batch (24 fps assumed, read at 1 fps)."}),
                "audio": ("AUDIO", {}),
                "thinking": (
                    "BOOLEAN",
                    {"tooltip": "Reason before answering, where the model has a thinking mode.", "default": False},
                ),
                "use_default_template": (
                    "BOOLEAN",
                    {
                        "tooltip": "Wrap the prompt in the model's own chat "
                        "template and system prompt, where it has them.",
                        "advanced": True,
                        "default": True,
                    },
                ),
                "mtp": (
                    "COMBO",
                    {
                        "tooltip": "Speculative decoding with a multi-token-prediction head, where the "
                        "checkpoint has one; auto picks the draft depth, 2-5 fix it.",
                        "default": "auto",
                        "multiselect": False,
                        "options": MTP,
                    },
                ),
                "system_prompt": (
                    "STRING",
                    {
                        "tooltip": "Takes the place of the chat template's system prompt; "
                        "unused without the default template.",
                        "forceInput": True,
                        "multiline": False,
                    },
                ),
            },
        }

    RETURN_TYPES = ("STRING", "STRING")
    RETURN_NAMES = ("generated_text", "thinking")
    OUTPUT_TOOLTIPS = (None, None)
    SEARCH_ALIASES = ["LLM", "gemma"]

    async def execute(
        self,
        clip,
        prompt: str,
        max_length: int,
        sampling_mode: str,
        image=None,
        video=None,
        audio=None,
        thinking: bool = False,
        use_default_template: bool = True,
        mtp: str = "auto",
        system_prompt: str = "",
        **kwargs: Any,
    ):
        from nodes.models.text_generate import split_thinking

        ref = require_component(clip, "text_encoder", "clip")
        if sampling_mode not in ("on", "off"):
            raise ValueError(f"sampling_mode: {sampling_mode!r} is not one of on, off")
        sampling = {**UNSET, **combo_inputs(kwargs, "sampling_mode")} if sampling_mode == "on" else dict(UNSET)
        params = {
            "prompt": prompt,
            "max_length": int(max_length),
            "use_template": bool(use_default_template),
            "system_prompt": system_prompt or "",
            "thinking": bool(thinking),
            "do_sample": sampling_mode == "on",
            "media": [
                name for name, value in (("image", image), ("video", video), ("audio", audio)) if value is not None
            ],
            **sampling,
        }
        out = await call_model_fn("text_generate", ref, "clip", {}, params)
        text = bytes(out["text"].numpy()).decode("utf-8")
        return split_thinking(text)


NODE_CLASS_MAPPINGS = {"TextGenerate": TextGenerate}
NODE_DISPLAY_NAME_MAPPINGS = {"TextGenerate": "Generate Text"}
