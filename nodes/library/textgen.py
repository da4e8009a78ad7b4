"""Today's ComfyUI Generate Text (`comfy_extras.nodes_textgen`, added after 0.3.64): a text encoder's language
model writes text from a prompt (the web UI's templates use it to expand an image prompt). It runs as the
`text_generate` ModelFn on the executors; nodes.models.text_generate says how it generates.

Sampling "off" is greedy; "on" samples with the option's settings and seed. `thinking` changes only Krea 2's
Qwen3-VL and Qwen3.5 (without it the template closes the reasoning block, as ComfyUI's tokenizers do); `mtp` changes
nothing (no file here has a multi-token-prediction head), as in ComfyUI. Images, video and audio are read by
vision-language encoders only: Z-Image's and FLUX.2 Klein's Qwen3 ignore them, as ComfyUI's do; Qwen3.5 (FLUX 3's
prompt upsampler) reads images, each picture of the batch as one; Qwen-Image's are refused (generation there does
not read images yet)."""

from __future__ import annotations

import re
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
        inputs = {} if image is None else {"image": image}  # read by the models with a vision tower (Qwen3.5)
        out = await call_model_fn("text_generate", ref, "clip", inputs, params)
        text = bytes(out["text"].numpy()).decode("utf-8")
        return split_thinking(text)


# The system prompts of Generate LTX2 Prompt: our own wording of what ComfyUI's (Lightricks' prompt-enhancer
# instructions, whose text is not copied here) ask of Gemma, so on real weights the expanded prompts differ from
# ComfyUI's; a `system_prompt` input replaces them.
LTX2_T2V_SYSTEM = (
    "You turn a short description of a scene into a detailed prompt for a text-to-video model that also makes the "
    "sound. Keep everything the user asked for and add concrete visual detail where the request is vague: "
    "setting, lighting, materials, the people's clothing and expressions. Describe the action in order as it "
    "happens, in the present tense, and describe the sounds beside it: ambience, effects, and quoted speech only "
    "when the user asks for speech. Add no camera movement the user did not ask for, no cuts and no timestamps. "
    "Write one paragraph of plain English without headings or markdown. If the request cannot be used, return it "
    "unchanged."
)
LTX2_I2V_SYSTEM = (
    "You write a concise prompt for an image-to-video model that also makes the sound. The image is the video's "
    "first frame; the user says what should happen. Describe only what changes from the image: the actions in "
    "order, in the present tense, with the sounds that go with them (ambience, effects, and quoted speech only "
    "when the user asks for speech). Keep what the user asked for, add no camera movement the user did not ask "
    "for, no cuts and no timestamps, and do not restate what the image already shows. Write one paragraph of "
    "plain English without headings or markdown. If the request cannot be used, return it unchanged."
)


class TextGenerateLTX2Prompt(TextGenerate):
    """Generate LTX2 Prompt: Generate Text with Gemma 3's chat around a prompt-expanding system prompt (image-to-
    video when an image is given); an empty answer gives the user's prompt back."""

    SEARCH_ALIASES = ["prompt enhance", "LLM", "gemma"]

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
        system = (system_prompt or "").strip() or (LTX2_I2V_SYSTEM if image is not None else LTX2_T2V_SYSTEM)
        gemma4 = _is_gemma4(clip)
        if gemma4:
            chat = gemma4_chat(system, prompt, image is not None, bool(thinking))
        else:
            media = "\n<image_soft_token>\n" if image is not None else ""
            chat = (
                f"<start_of_turn>system\n{system}<end_of_turn>\n"
                f"<start_of_turn>user\n{media}\nUser Raw Input Prompt: {prompt}.<end_of_turn>\n"
                "<start_of_turn>model\n"
            )
        text, reasoning = await super().execute(
            clip, chat, max_length, sampling_mode, image, video, audio, thinking, use_default_template, mtp, **kwargs
        )
        if gemma4:
            text = GEMMA4_MARKERS.sub("", text).strip()
        return text or prompt, reasoning


def _is_gemma4(clip) -> bool:
    """ComfyUI tells the Gemma 4 (LTX-2.5) prompt enhancer from LTX-2's Gemma 3 by its tokenizer; here by the file."""
    from nodes.models.detect import probe

    return bool(getattr(clip, "sources", None)) and probe(clip.sources[0]).arch == "gemma4"


def gemma4_chat(system: str, prompt: str, image: bool, thinking: bool) -> str:
    """Gemma 4's turns around the system prompt and the user's prompt, as ComfyUI's Generate LTX2 Prompt builds
    them: the image (i2v) before the request, the model's turn opened on its final-answer channel unless it
    thinks first."""
    user = f"User Raw Input Prompt: {prompt}." if image else f"user prompt: {prompt}"
    think = "<|think|>\n" if thinking else ""
    media = "<|image><|image|><image|>\n\n" if image else ""
    answer = "" if thinking else "<|channel>final\n"
    return f"<|turn>system\n{think}{system}<turn|>\n<|turn>user\n{media}{user}<turn|>\n<|turn>model\n{answer}"


# What Gemma 4's answer may still hold of its channels and turns once the reasoning is split off (ComfyUI strips it).
GEMMA4_MARKERS = re.compile(r"</?think>|<\|channel>\w*\n?|<channel\|>|<\|turn>\w*\n?")


NODE_CLASS_MAPPINGS = {"TextGenerate": TextGenerate, "TextGenerateLTX2Prompt": TextGenerateLTX2Prompt}
NODE_DISPLAY_NAME_MAPPINGS = {"TextGenerate": "Generate Text", "TextGenerateLTX2Prompt": "Generate LTX2 Prompt"}
